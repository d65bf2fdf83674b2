"""The course's facts file, `lab/common/labkit/facts.toml`, as typed models.

The labs read the same file with the standard library (`labkit/facts.py`); pages read it through
these models: the `fact()` macro, and the prices of the page header. Every problem in the file is
reported at once, each naming its key, with the close match for a misspelt one:

    lab/common/labkit/facts.toml: 1 problem:
      - cards.rtx-4090.torch_totl: unknown key 'torch_totl' (did you mean 'torch_total'?)
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StringConstraints,
    ValidationError,
    model_validator,
)

from ..errors import FactsError
from ..record.units import Unit

FACTS_FILE = Path("lab/common/labkit/facts.toml")
"""The facts file, relative to the project's root."""
MEASURED = "measured"
Key = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
Number = StrictInt | StrictFloat


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Fact(_Strict):
    """One fact: a value with its unit, where it comes from and when it was read."""

    value: Number
    unit: Unit = "none"
    source: str = Field(min_length=1)
    """A URL, a citation where no URL exists, or "measured" (with run, lesson and value_of)."""
    date: date
    """When it was read or measured."""
    note: str = ""
    run: str | None = None
    """The run that measured it (source "measured")."""
    lesson: str | None = None
    """The lesson whose run it is (source "measured")."""
    value_of: str | None = None
    """The recorded value it is: `step.value` of that run, or `host.gpu.memory_mib`."""
    since: str | None = None
    """The engine release it holds from."""
    until: str | None = None
    """The engine release it held until (not included)."""

    @model_validator(mode="after")
    def _measured(self) -> Fact:
        named = [k for k in ("run", "lesson", "value_of") if getattr(self, k) is not None]
        if self.source == MEASURED and len(named) < 3:
            raise ValueError("a measured fact names its run, lesson and value_of")
        if self.source != MEASURED and named:
            raise ValueError(f"{', '.join(named)}: only a measured fact names a run")
        return self

    def cite(self) -> str:
        """Where it comes from, as the tooltip says it."""
        if self.source == MEASURED:
            return f"measured in run {self.run} ({self.lesson}, {self.value_of})"
        return self.source


class Price(_Strict):
    """One public price per GPU-hour, with where and when it was read."""

    provider: str
    """Who rents the GPU at this price."""
    offer: str = ""
    """The offer's name, such as an instance type."""
    per_hour: float = Field(gt=0)
    """Price of one GPU for one hour."""
    currency: str = "USD"
    """ISO currency code."""
    date: date
    """When the price was read."""
    source: str
    """Where the price was read (a URL)."""
    note: str = ""


class Card(_Strict):
    """A GPU: how nvidia-smi names it, its memory both ways, its datasheet and measured figures."""

    name: str
    """As nvidia-smi prints it (a record's host.gpu.name)."""
    label: str
    """As a page writes it."""
    match: list[str]
    """Words that must all appear in the upper-cased nvidia-smi name."""
    avoid: list[str] = []
    """Words that must not."""
    memory: Fact
    bandwidth: Fact
    bf16_flops: Fact
    smi_total: Fact | None = None
    torch_total: Fact | None = None
    cuda_context: Fact | None = None
    measured_bandwidth: Fact | None = None
    measured_bf16_flops: Fact | None = None
    prices: dict[Key, Price] = {}


class Model(_Strict):
    """A model's config.json fields the lessons use, as published."""

    name: str
    model_type: str
    """transformers' name for the architecture (`qwen3` normalises each query and key head)."""
    source: str
    date: date
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    rope_theta: float
    rms_norm_eps: float
    torch_dtype: str
    native_context: Fact | None = None
    yarn_context: Fact | None = None


class _WithFacts(BaseModel):
    """A table whose own keys are declared and whose other keys are each a Fact."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)
    __pydantic_extra__: dict[str, Fact] = Field(init=False)


class Engine(_WithFacts):
    """How an engine plans its memory: the rule in words, and its defaults as facts."""

    name: str
    rule: str
    """The rule in words, as a page may quote it."""
    rule_source: str
    """Where the rule was read (the engine's source)."""
    date: date
    """When it was read."""
    version: str | None = None
    """The release it was read in, where one matters."""


class Crosscheck(_WithFacts):
    """A published log whose own answer an engine's rule must give."""

    engine: str
    card: str
    model: str
    source: str
    date: date
    note: str = ""


class Facts(_Strict):
    """The whole file."""

    format: Literal[1]
    cards: dict[Key, Card]
    models: dict[Key, Model]
    engines: dict[Key, Engine]
    crosschecks: dict[Key, Crosscheck] = {}

    @model_validator(mode="after")
    def _references(self) -> Facts:
        for key, check in self.crosschecks.items():
            for kind, ref in (("engines", check.engine), ("cards", check.card),
                              ("models", check.model)):  # fmt: skip
                if ref not in getattr(self, kind):
                    raise ValueError(f"crosschecks.{key}: no {kind}.{ref}")
        return self

    def card_named(self, gpu: str) -> Card | None:
        """The card nvidia-smi names so (a record's host.gpu.name), exactly; None if unknown."""
        return next((c for c in self.cards.values() if c.name == gpu), None)

    def lookup(self, name: str) -> Found:
        """The fact at a dotted name ('cards.rtx-4090.torch_total'); FactsError naming the
        file, the name and the close match when there is none."""
        return _lookup(self, name)

    def numbers(self) -> list[Found]:
        """Every fact that is a number (prices and texts left out), in file order."""
        found = []
        for name in _every_name(self):
            try:
                fact = _lookup(self, name)
            except FactsError:
                continue  # a table, not a fact
            if fact.value is not None and fact.price is None:
                found.append(fact)
        return found


@dataclass(frozen=True)
class Found:
    """What a fact's name leads to, ready to be shown: a number with its unit, a text or a
    price, and where it comes from."""

    name: str
    value: float | None
    unit: str
    text: str | None
    price: Price | None
    cite: str
    date: date
    note: str = ""


def _children(node: Any) -> dict[str, Any]:
    if isinstance(node, BaseModel):
        out = {k: getattr(node, k) for k in type(node).model_fields}
        out.update(node.__pydantic_extra__ or {})
        return {k: v for k, v in out.items() if v is not None}
    return dict(node) if isinstance(node, dict) else {}


def _every_name(node: Any, prefix: str = "") -> list[str]:
    names = []
    for key, child in _children(node).items():
        here = f"{prefix}.{key}" if prefix else key
        names.append(here)
        if not isinstance(child, (Fact, Price)):
            names += _every_name(child, here)
    return names


def _missing(facts: Facts, name: str) -> FactsError:
    close = difflib.get_close_matches(name, _every_name(facts), n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return FactsError(str(FACTS_FILE), [f"no fact '{name}' in {FACTS_FILE}{hint}"])


def _lookup(facts: Facts, name: str) -> Found:
    node: Any = facts
    cited: tuple[str, date] | None = None  # the source of the table a plain field sits in
    for part in name.split("."):
        children = _children(node)
        if part not in children or isinstance(node, (Fact, Price)):
            raise _missing(facts, name)
        if isinstance(node, (Model, Crosscheck)):
            cited = (node.source, node.date)
        elif isinstance(node, Engine):
            cited = (node.rule_source, node.date)
        node = children[part]
    if isinstance(node, Fact):
        return Found(name, float(node.value), node.unit, None, None, node.cite(), node.date,
                     node.note)  # fmt: skip
    if isinstance(node, Price):
        cite = f"{node.provider}, {node.offer}, per GPU-hour; {node.source}"
        return Found(name, node.per_hour, "none", None, node, cite, node.date, node.note)
    if isinstance(node, (int, float, str)) and cited is not None:
        source, when = cited
        if isinstance(node, str):
            return Found(name, None, "none", node, None, source, when)
        return Found(name, float(node), "none", None, None, source, when)
    inside = ", ".join(_children(node)) or "nothing"
    raise FactsError(
        str(FACTS_FILE),
        [f"'{name}' in {FACTS_FILE} is a table, not a fact: name one of its keys ({inside})"],
    )


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at a location of the file (for a misspelt key)."""
    current: Any = Facts
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
        args = [a for a in get_args(current) if a is not type(None)]
        if get_origin(current) is not dict and len(args) == 1:
            current = args[0]  # X | None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _describe(err: Any) -> str:
    loc = tuple(err["loc"])
    where = ".".join(str(p) for p in loc) or "the top level"
    if err["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"{where}: unknown key '{loc[-1]}'{hint}"
    if err["type"] == "missing":
        return f"{where}: required but missing"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if loc else message


def parse_facts(text: str, shown: str = str(FACTS_FILE)) -> Facts:
    """The facts in a TOML text; FactsError listing every problem, each naming its key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactsError(shown, [f"not valid TOML: {exc}"]) from None
    try:
        return Facts.model_validate(raw)
    except ValidationError as exc:
        raise FactsError(shown, [_describe(e) for e in exc.errors()]) from None


_CACHE: dict[Path, tuple[float, Facts]] = {}


def load_facts(root: Path) -> Facts:
    """The project's facts file, read again only when it changed; FactsError if it is missing
    or wrong."""
    path = root / FACTS_FILE
    if not path.is_file():
        raise FactsError(
            str(FACTS_FILE), [f"no such file (the course's facts live in {FACTS_FILE})"]
        )
    mtime = path.stat().st_mtime
    cached = _CACHE.get(path)
    if cached is None or cached[0] != mtime:
        cached = (mtime, parse_facts(path.read_text(encoding="utf-8")))
        _CACHE[path] = cached
    return cached[1]
