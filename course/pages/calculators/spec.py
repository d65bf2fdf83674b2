"""What a calculator is made of: its inputs and where their first values come from, its outputs,
the recorded points its chart draws, and the short table of worked rows a PDF prints.

A seed says where an input's first value comes from, in one of these forms:

    model:num_hidden_layers           a field of the calculator's model in the course's facts
    value:cache-budget.weights        a recorded value (or arithmetic on values) of the page's run
    fact:engines.vllm.block_size      a course fact
    card:torch_total                  a figure of the card chosen first (the facts' or the run's)
    const:4096                        a number written here (an input the lab chose, not measured)
    engine:transformers               for a field of choices: the newest choice (a release) not
                                      after the version of that engine the page's run recorded

The arithmetic is the page's script's (docs/assets/calculator.js, which tests hold to the lab's
own functions); this side only says what the form holds and what was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEED_KINDS = ("model", "value", "fact", "card", "const", "engine")
GROUPS = {
    "model": "Your model (its config.json)",
    "card": "The card",
    "engine": "The serving engine",
    "work": "The work",
}
"""Each fieldset's legend, in the order the form shows them."""


@dataclass(frozen=True)
class Input:
    """One field of the form, named after config.json or the course's facts."""

    name: str
    """The input's name: a config.json field (`num_hidden_layers`) or a facts one (`card`)."""
    label: str
    """What the field is, in words."""
    seed: str
    """Where its first value comes from (see the module docstring)."""
    unit: str = ""
    """The unit a reader types it in (B, KiB, MiB, GiB, GB/s, TFLOP/s, tok...); '' for a count."""
    group: str = "model"
    """The fieldset it sits in (a key of GROUPS)."""
    step: str = "1"
    """The input's step: '1' for counts, 'any' for measured sizes."""
    minimum: str = "0"
    decimals: int | None = None
    """Decimals of the seed as the field shows it (None: a whole number)."""
    checkbox: bool = False
    """A yes-or-no field (`tie_word_embeddings`)."""
    choices: tuple[tuple[str, str], ...] = ()
    """A field of choices, (value, label) each: the releases of an engine whose rule the script
    transcribes (`release`); its seed is `engine:<name>`. () for a number."""


@dataclass(frozen=True)
class Output:
    """One result: an `<output>` the script fills, in `unit`."""

    name: str
    label: str
    unit: str = ""
    """The unit it is shown in: B, KiB, MiB, GiB, tok, µs, TFLOP/s, x (a plain count: '')."""


@dataclass(frozen=True)
class Grid:
    """Outputs as a table: one row per design or engine, one column per quantity; the output of
    row `r` and column `c` is named `c_r`."""

    caption: str
    rows: tuple[tuple[str, str], ...]
    """(key, label) per row."""
    columns: tuple[Output, ...]
    """Each column's name (the prefix of its outputs), label and unit."""


@dataclass(frozen=True)
class Point:
    """A recorded value the chart draws, at `x`; the same name finds a learner's value in the
    JSON compare.py writes."""

    series: str
    """Which set of points it belongs to (the script draws each set in its own marker)."""
    x: float
    value: str
    """`step.name` of the page's run."""
    label: str
    """What it is, for the marker's tooltip and the chart's description."""


@dataclass(frozen=True)
class Cell:
    """A cell of the worked rows: words, or a recorded value (an expression) as value() shows it."""

    text: str = ""
    expr: str | None = None
    unit: str | None = None
    decimals: int | None = None
    percent: bool = False
    signed: bool = False
    """Show a plus sign before a positive number (a gap)."""


@dataclass(frozen=True)
class Table:
    """The worked rows the PDF prints (and the page shows under the form)."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True)
class CardOption:
    """A card the chooser offers besides the facts' cards: figures of the page's run (a lab that
    counts a card its own way), as expressions of recorded values, in bytes."""

    key: str
    label: str
    figures: dict[str, str]
    """Figure name (torch_total, cuda_context, ...) -> expression in bytes."""


@dataclass(frozen=True)
class Calculator:
    """One lesson's calculator."""

    name: str
    """What the macro is given and `data-calculator` says: 'kv-cache'."""
    title: str
    """The form's heading."""
    model: str
    """The facts model whose config the seeds come from ('qwen3-8b')."""
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...] = ()
    grid: Grid | None = None
    card_needs: tuple[str, ...] = ("torch_total",)
    """The figures a card needs to be offered (cards of the facts that lack one are left out)."""
    card_seed: str = "h200"
    """The card chosen first: a facts key or an extra option's key."""
    extra_cards: tuple[CardOption, ...] = ()
    card_figures: dict[str, dict[str, str]] = field(default_factory=dict)
    """Figures of a facts card taken from the page's run instead (card key -> figure name ->
    expression in base units): the H200's copy bandwidth as the lesson's own step measured it."""
    points: tuple[Point, ...] = ()
    values: dict[str, str] = field(default_factory=dict)
    """Further recorded values the script needs (name -> expression)."""
    facts: dict[str, str] = field(default_factory=dict)
    """Course facts the script needs (name -> the fact's dotted name), beside `values`."""
    chart: str = ""
    """What the chart draws, in words (its accessible name)."""
    chart2: str = ""
    """What a second chart draws, in words ('' for none)."""
    table: Table | None = None
