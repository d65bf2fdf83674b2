"""The `fact()` macro: one of the course's facts (lab/common/labkit/facts.toml) on a page.

    {{ fact("cards.rtx-4090.torch_total") }}                     23.52 GiB
    {{ fact("cards.rtx-4090.smi_total", unit="GiB", decimals=2) }} 23.99 GiB
    {{ fact("engines.vllm.gpu_memory_utilization", percent=True) }} 92 %
    {{ fact("cards.h200.prices.runpod-community") }}              $3.59
    {{ fact("models.qwen3-8b.num_key_value_heads") }}             8

Formatted as `value()` formats a recorded value (the same options); the tooltip says where the
fact comes from and when it was read or measured. An unknown name is a page problem, collected
like any macro's, with the close match.
"""

from __future__ import annotations

import html

from ..errors import FactsError, PageError
from ..lab.facts import load_facts
from ..record.quantity import Quantity
from .context import PageContext
from .format import day, money
from .macros import macro, shown_number


@macro
def fact(
    ctx: PageContext, name: str, unit: str | None = None, decimals: int | None = None,
    percent: bool = False, times: bool = False, show_unit: bool = True, separators: bool = True,
) -> str:  # fmt: skip
    """A course fact, formatted, inside a span whose tooltip names its source and date."""
    facts = load_facts(ctx.root)  # a wrong file: its FactsError names every key
    try:
        found = facts.lookup(name)
    except FactsError as exc:  # one name: one line
        raise PageError(exc.problems[0]) from None
    if found.price is not None:
        shown = money(found.price.per_hour, found.price.currency)
    elif found.text is not None:
        shown = html.escape(found.text)
    else:
        assert found.value is not None
        q = Quantity(found.value, found.unit, integral=float(found.value).is_integer())
        shown = shown_number(repr(name), q, unit, decimals, percent, times, show_unit, separators)
    when = "" if found.cite.startswith("measured") else "read "
    said = f"{found.cite}, {when}{day(found.date.isoformat())}"
    if found.note:
        said += f". {found.note}"
    title = html.escape(said, quote=True)
    key = html.escape(name, quote=True)
    attrs = f'class="course-value course-fact" data-fact="{key}" title="{title}"'
    return f"<span {attrs}>{shown}</span>"
