"""Numbers with units in prose: the units a reader sees spelled out, how they convert, and the
quantities a typed number may be a copy of (a run's recorded values; the course's facts plug in
with `known_source`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ...errors import FactsError
from ...lab.facts import FACTS_FILE, load_facts
from ...record.units import SCALE
from ..context import PageContext


@dataclass(frozen=True)
class Unit:
    """A unit as prose spells it."""

    family: str
    """Spellings of one unit share a family ('tok' and 'tokens'); a unit printed twice is two
    spellings of one family in a row."""
    dimension: str
    """As `record.units.SCALE` names it; 'none' for a ratio or FLOP per byte."""
    factor: float
    """To the dimension's base unit, as `record.units.SCALE` gives it."""
    record: str | None = None
    """The recorded unit of that name, for the macro a copy should become."""


WORDS: dict[str, tuple[str, ...]] = {
    "B": ("bytes", "byte"),
    "KB": ("kB",),
    "µs": ("us",),
    "ms": ("milliseconds", "millisecond"),
    "s": ("seconds", "second"),
    "min": ("minutes",),
    "tok": ("tokens", "token"),
    "tok/s": ("tokens/s", "tokens a second", "tokens per second"),
    "%": ("percent", "per cent"),
}
"""A recorded unit -> the other ways prose spells it."""
RATIOS: dict[str, tuple[str, ...]] = {
    "×": ("×", "x"),
    "FLOP/B": ("FLOP per byte", "FLOP/byte", "FLOP/B"),
}
"""Units of plain numbers in the record (a ratio, an arithmetic intensity)."""


def _units() -> dict[str, Unit]:
    """Every unit of the record (`record.units.SCALE`, its dimensions and factors), with its
    other spellings, and the spellings of plain numbers."""
    table: dict[str, Unit] = {}
    for name, (dimension, factor) in SCALE.items():
        if name != "none":
            for spelling in (name, *WORDS.get(name, ())):
                table[spelling] = Unit(name, dimension, factor, name)
    for family, spellings in RATIOS.items():
        for spelling in spellings:
            table[spelling] = Unit(family, "none", 1.0)
    return table


UNITS = _units()
_SPELLINGS = "|".join(re.escape(s) for s in sorted(UNITS, key=len, reverse=True))
NUMBER = r"(?<![\w.,\-/])(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?"
TYPED = re.compile(
    NUMBER + rf"(?P<gap>[ \u00a0\u202f\u2009]?)(?P<unit>{_SPELLINGS})(?![\w/])",
)
"""A number followed by a unit: `4.98 ms`, `448.00 MiB`, `24 GiB`, `72 %`, `1.81×`."""
TWICE = re.compile(
    NUMBER + rf"[ \u00a0\u202f\u2009]?(?P<unit>{_SPELLINGS})\s+(?P<again>{_SPELLINGS})(?![\w/])"
)
"""A number whose unit is followed by a unit again: `72 % %`, `811,008 tok tokens`."""
PLAIN = re.compile(NUMBER + r"(?![\d])")
"""Any number."""
PRODUCT = re.compile(r"\s+(?:cards?|GPUs?)\b")
"""After `24 GB`: the card's name, not a quantity."""
PRODUCT_NAME = re.compile(NUMBER + r"(?:(?:GB|TB)(?!\w)|[ \u00a0](?:GB|TB)\s+(?:cards?|GPUs?)\b)")
"""A card's name as vendors write it: `40GB`, `24 GB card`."""


@dataclass(frozen=True)
class Typed:
    """A number with a unit as prose shows it."""

    start: int
    end: int
    text: str
    number: str
    """The number alone, as typed ('1,024.5')."""
    value: float
    decimals: int
    unit: str
    """The spelling, a key of UNITS."""


def significant_digits(number: str) -> int:
    """Significant digits of a number as typed: leading zeros never count, an integer's trailing
    zeros do not either."""
    whole, _, frac = number.replace(",", "").partition(".")
    digits = (whole + frac).lstrip("0")
    if not frac:
        digits = digits.rstrip("0")
    return len(digits)


def chosen_length(typed: Typed) -> bool:
    """A count of tokens that is a power of two (a context, a prompt, a block of 256): a length
    the lab was told to use, not a measurement."""
    whole = typed.value == int(typed.value) and typed.value >= 2
    return (
        UNITS[typed.unit].family == "tok"
        and whole
        and int(typed.value) & (int(typed.value) - 1) == 0
    )


def typed_numbers(text: str) -> Iterator[Typed]:
    """Every number with a unit in text (product names such as `40GB` or `24 GB card` left out:
    a vendor's name for a card, not a quantity)."""
    for match in TYPED.finditer(text):
        unit = match.group("unit")
        decimal_unit = UNITS[unit].family in ("GB", "TB")
        if decimal_unit and (not match.group("gap") or PRODUCT.match(text, match.end())):
            continue
        if unit in ("x", "×") and re.match(r"\s*\d", text[match.end() :]):
            continue  # 2 × 36 × 8: a product, not a ratio
        if unit == "x" and match.group("gap"):
            continue  # "4 x" is the letter, "4x" the ratio
        frac = match.group("frac") or ""
        number = match.group("int") + (f".{frac}" if frac else "")
        value = float(number.replace(",", ""))
        yield Typed(match.start(), match.end(), match.group(0), number, value, len(frac), unit)


@dataclass(frozen=True)
class Known:
    """A quantity a page should insert with a macro, never type: a recorded value or a fact."""

    name: str
    """How the macro names it: `prefill.ttft_128`, `cards.rtx-4090.torch_total`."""
    value: float
    unit: str
    """A unit of `record.units.SCALE`."""
    integral: bool = False
    """A whole count (an int of the record): never a ratio or a share."""
    what: str = "recorded value"
    """'recorded value' or 'fact', as messages say it."""
    macro: str = "value"
    """The macro that inserts it."""

    def shown_as(self, unit: Unit) -> float | None:
        """Its value in a typed unit, or None when the dimensions differ (a ratio typed as a
        percentage reads a plain number as a share)."""
        dimension, factor = SCALE.get(self.unit, ("?", 1.0))
        if dimension == "none" and self.integral and unit.family in ("%", "×"):
            return None  # a count of layers is not a ratio that happens to be 12
        if unit.family == "%" and dimension == "none":
            return self.value * 100
        if unit.dimension != dimension:
            return None
        return self.value * factor / unit.factor


KnownSource = Callable[[PageContext], list[Known]]
KNOWN_SOURCES: list[KnownSource] = []
"""Where the quantities a typed number may copy come from, each read for one page."""


def known_source(source: KnownSource) -> KnownSource:
    """Register a source of known quantities (the facts file plugs in with one call)."""
    KNOWN_SOURCES.append(source)
    return source


@known_source
def recorded_values(ctx: PageContext) -> list[Known]:
    """Every number the page's run recorded, in any step."""
    known = []
    for step in ctx.run.record.steps:
        for name, recorded in step.values.items():
            if recorded.type != "str" and not isinstance(recorded.value, str):
                whole = recorded.type == "int"
                known.append(
                    Known(f"{step.id}.{name}", float(recorded.value), recorded.unit, whole)
                )
    return known


@known_source
def course_facts(ctx: PageContext) -> list[Known]:
    """Every number of the course's facts file (a card's memory, an engine's share, a model's
    field); none when the project has no facts file (a wrong one: the fact() macro says why)."""
    if not (ctx.root / FACTS_FILE).is_file():
        return []
    try:
        facts = load_facts(ctx.root)
    except FactsError:
        return []
    return [
        Known(f.name, f.value, f.unit, float(f.value).is_integer(), "fact", "fact")
        for f in facts.numbers()
        if f.value is not None
    ]


def known_quantities(ctx: PageContext) -> list[Known]:
    """Every known quantity of a page, from every registered source."""
    return [known for source in KNOWN_SOURCES for known in source(ctx)]


def copies_of(typed: Typed, known: list[Known]) -> list[Known]:
    """The known quantities a typed number equals at the precision it shows."""
    unit = UNITS[typed.unit]
    shown = f"{typed.value:.{typed.decimals}f}"
    return [
        k
        for k in known
        if (v := k.shown_as(unit)) is not None and f"{v:.{typed.decimals}f}" == shown
    ]


def macro_for(known: Known, typed: Typed) -> str:
    """The macro call that shows a known quantity as the typed number shows it (with the typed
    word after it where the macro would print another spelling)."""
    unit = UNITS[typed.unit]
    args, tail = [f'"{known.name}"'], ""
    if known.macro == "value":
        if unit.family == "%" and known.unit == "none":
            args.append("percent=True")
        elif unit.record and unit.record != known.unit:
            args.append(f'unit="{unit.record}"')
        args.append(f"decimals={typed.decimals}")
        if unit.family == "×":
            args.append("times=True")
        elif unit.family != "%" and typed.unit != unit.record:
            args.append("show_unit=False")
            tail = f" {typed.unit}"
    return f"{{{{ {known.macro}({', '.join(args)}) }}}}{tail}"
