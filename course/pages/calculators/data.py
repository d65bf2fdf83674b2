"""A calculator's numbers, read for one page: its inputs' first values, the cards it offers, the
recorded points and values its chart draws. Everything in base units (bytes, bytes or FLOP per
second, seconds, tokens), as the page's script computes in them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import CourseError, FactsError, PageError
from ...lab.facts import Card, Facts, load_facts
from ...record.quantity import Quantity
from ...record.units import SCALE, convert
from ..context import PageContext
from .spec import SEED_KINDS, Calculator, Input

BASE = {"bytes": "B", "time": "s", "bandwidth": "B/s", "compute": "FLOP/s", "tokens": "tok",
        "flop": "FLOP", "token rate": "tok/s"}  # fmt: skip
"""Each dimension's base unit: what the script computes in."""
CARD_FIGURES = ("torch_total", "cuda_context", "smi_total", "memory", "bandwidth", "bf16_flops",
                "measured_bandwidth", "measured_bf16_flops")  # fmt: skip
CONTEXT_CARD = "h200"
"""The card whose measured CUDA context stands in for a card whose own was never measured
(as the lab kit's facts.context_of does)."""


class CalculatorError(PageError):
    """A calculator that cannot be made; the message names the calculator and the part."""


def base_of(value: float, unit: str) -> float:
    """A number in its dimension's base unit (23.52 GiB -> bytes); a plain number as it is."""
    if unit in ("none", "%", ""):
        return value
    if unit not in SCALE:
        raise CalculatorError(f"unit {unit!r} is not one of the course's units")
    return convert(value, unit, BASE.get(SCALE[unit][0], unit))


def in_unit(base: float, unit: str) -> float:
    """A base-unit number in `unit` (bytes -> GiB); as it is for a count."""
    if unit in ("", "none", "tok"):
        return base
    return convert(base, BASE[SCALE[unit][0]], unit)


def quantity_base(q: Quantity) -> float:
    """A recorded quantity in base units (a plain number as it is)."""
    return base_of(q.value, q.unit)


@dataclass(frozen=True)
class CardData:
    """A card as the chooser offers it."""

    key: str
    label: str
    figures: dict[str, float]
    match: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """The card for the page's script."""
        out: dict[str, Any] = {"key": self.key, "label": self.label, "figures": self.figures}
        if self.match:
            out |= {"match": list(self.match), "avoid": list(self.avoid)}
        if self.note:
            out["note"] = self.note
        return out


def _facts_figures(card: Card, context: float | None) -> tuple[dict[str, float], str]:
    figures: dict[str, float] = {}
    for name in CARD_FIGURES:
        fact = getattr(card, name)
        if fact is not None:
            figures[name] = round(base_of(float(fact.value), fact.unit))
    note = ""
    if "cuda_context" not in figures and context is not None:
        figures["cuda_context"] = context
        note = "its CUDA context as measured on the H200"
    return figures, note


def _card_label(label: str, figures: dict[str, float], needs: tuple[str, ...]) -> str:
    shown = []
    if "torch_total" in needs:
        shown.append(f"{figures['torch_total'] / 2**30:,.2f} GiB as PyTorch sees it")
    if "bandwidth" in needs:
        shown.append(f"{figures['bandwidth'] / 1e9:,.0f} GB/s")
    if "bf16_flops" in needs:
        shown.append(f"{figures['bf16_flops'] / 1e12:,.1f} TFLOP/s")
    return f"{label} ({', '.join(shown)})" if shown else label


def cards(ctx: PageContext, calc: Calculator, facts: Facts) -> list[CardData]:
    """The cards the chooser offers: the calculator's own (figures of the page's run), then each
    card of the facts that has every figure the calculator needs, in the file's order."""
    out = []
    for option in calc.extra_cards:
        figures = {}
        for name, expr in option.figures.items():
            try:
                figures[name] = quantity_base(ctx.evaluate(expr))
            except CourseError as exc:
                raise CalculatorError(f"card '{option.key}', {name}: {exc}") from None
        out.append(CardData(option.key, _card_label(option.label, figures, calc.card_needs),
                            figures))  # fmt: skip
    h200 = facts.cards.get(CONTEXT_CARD)
    context = None
    if h200 is not None and h200.cuda_context is not None:
        context = float(round(base_of(float(h200.cuda_context.value), h200.cuda_context.unit)))
    for key, card in facts.cards.items():
        figures, note = _facts_figures(card, context)
        for name, expr in calc.card_figures.get(key, {}).items():
            try:
                figures[name] = quantity_base(ctx.evaluate(expr))
            except CourseError as exc:
                raise CalculatorError(f"card '{key}', {name}: {exc}") from None
        if all(n in figures for n in calc.card_needs):
            label = _card_label(card.label, figures, calc.card_needs)
            out.append(CardData(key, label, figures, tuple(card.match), tuple(card.avoid), note))
    return out


def _version(text: str) -> tuple[int, ...]:
    """A release's numbers, for comparing: '5.24.0' -> (5, 24, 0); '5.24.0rc1' -> (5, 24, 0)."""
    parts = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() < len(part):
            break
    return tuple(parts)


def release_choice(choices: tuple[tuple[str, str], ...], version: str) -> str | None:
    """The newest of `choices` (releases, '5.17') not after `version` ('5.24.0'): the rule a
    version of the engine follows when each choice is the release that rule came with; None when
    every choice is newer."""
    have = _version(version)
    fitting = [c for c, _ in choices if _version(c) <= have]
    return max(fitting, key=_version) if fitting else None


def _engine_seed(ctx: PageContext, field: Input, engine: str) -> str:
    """A field of releases' first choice: the release the page's run's engine version follows."""
    if not field.choices:
        raise CalculatorError(f"input '{field.name}': an engine: seed needs a field of choices")
    version = ctx.run.record.engine.get(engine)
    if not version:
        raise CalculatorError(
            f"input '{field.name}': run {ctx.run.run_id} recorded no version of {engine}"
        )
    chosen = release_choice(field.choices, version)
    if chosen is None:
        known = ", ".join(c for c, _ in field.choices)
        raise CalculatorError(
            f"input '{field.name}': {engine} {version} of run {ctx.run.run_id} is older than"
            f" every release the form offers ({known})"
        )
    return chosen


def seed(
    ctx: PageContext, calc: Calculator, field: Input, facts: Facts, card: CardData
) -> float | str:
    """An input's first value in base units, from where its seed says (a choice's value, for a
    field of choices)."""
    kind, _, what = field.seed.partition(":")
    if kind not in SEED_KINDS:
        raise CalculatorError(
            f"input '{field.name}': seed {field.seed!r} is not one of model:, value:, fact:,"
            " card:, const: or engine:"
        )
    if kind == "engine":
        return _engine_seed(ctx, field, what)
    if field.choices:
        raise CalculatorError(f"input '{field.name}': a field of choices is seeded by engine:")
    try:
        if kind == "const":
            return float(what)
        if kind == "card":
            if what not in card.figures:
                raise CalculatorError(f"card '{card.key}' has no {what}")
            return card.figures[what]
        if kind == "value":
            return quantity_base(ctx.evaluate(what))
        name = f"models.{calc.model}.{what}" if kind == "model" else what
        found = facts.lookup(name)
    except FactsError as exc:  # one name: its one problem, with the close match
        problem = exc.problems[0]
        raise CalculatorError(f"input '{field.name}' (seed {field.seed}): {problem}") from None
    except (CourseError, ValueError) as exc:
        raise CalculatorError(f"input '{field.name}' (seed {field.seed}): {exc}") from None
    if found.value is None:
        raise CalculatorError(f"input '{field.name}': {name} is not a number")
    return base_of(found.value, found.unit)


@dataclass(frozen=True)
class Numbers:
    """Everything a calculator shows first, read for one page."""

    seeds: dict[str, float | str]
    cards: list[CardData]
    card: str
    points: list[dict[str, Any]]
    values: dict[str, float]
    model: str
    model_type: str


def numbers(ctx: PageContext, calc: Calculator) -> Numbers:
    """The calculator's first values, cards, points and further values for this page's run."""
    facts = load_facts(ctx.root)
    if calc.model not in facts.models:
        raise CalculatorError(f"no model '{calc.model}' in the course's facts")
    offered = cards(ctx, calc, facts)
    chosen = next((c for c in offered if c.key == calc.card_seed), None)
    if chosen is None:
        known = ", ".join(c.key for c in offered) or "none"
        raise CalculatorError(f"its first card '{calc.card_seed}' is not offered (cards: {known})")
    seeds = {f.name: seed(ctx, calc, f, facts, chosen) for f in calc.inputs}
    points = []
    for point in calc.points:
        try:
            q = ctx.evaluate(point.value)
        except CourseError as exc:
            raise CalculatorError(f"point {point.value}: {exc}") from None
        points.append({"series": point.series, "x": point.x, "name": point.value,
                       "label": point.label, "y": quantity_base(q)})  # fmt: skip
    values = {}
    for name, expr in calc.values.items():
        try:
            values[name] = quantity_base(ctx.evaluate(expr))
        except CourseError as exc:
            raise CalculatorError(f"value '{name}' ({expr}): {exc}") from None
    for name, fact_name in calc.facts.items():
        try:
            found = facts.lookup(fact_name)
        except FactsError as exc:
            raise CalculatorError(f"fact '{name}': {exc.problems[0]}") from None
        if found.value is None:
            raise CalculatorError(f"fact '{name}': {fact_name} is not a number")
        values[name] = base_of(found.value, found.unit)
    model = facts.models[calc.model]
    return Numbers(seeds, offered, chosen.key, points, values, model.name, model.model_type)
