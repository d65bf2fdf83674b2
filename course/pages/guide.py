"""The learners' guide "Before you start" (docs/before-you-start.md): for every written lesson, its
zip, the GPU memory it needs, its hands-on time and what that costs on the card a learner rents,
and its install lines for a machine with an NVIDIA GPU and for one without, from the same source
as each lesson's "Get the files" and START-HERE.md (`install.py`).

    {{ lab_costs() }}       the table of hands-on time and cost per lesson, on the rented card
    {{ lab_installs() }}    per lesson: the zip, and its install lines with and without a GPU
"""

from __future__ import annotations

import html
from collections.abc import Iterator

from ..lab.facts import Price
from ..lab.load import LoadedLab, load_lab
from ..record.models import Run
from ..record.store import Store
from . import facts
from .choose import page_run
from .context import PageContext
from .format import minutes_text, money
from .install import cpu_install_commands, get_files_commands
from .lessons import read_meta
from .macros import ANSWERABLE, macro
from .outline import Lesson


def _labs(ctx: PageContext) -> Iterator[tuple[Lesson, LoadedLab, Run]]:
    """Every written lesson of the outline with its lab and the run its page shows; a lesson
    whose lab or run cannot be read is left out (its own page reports why, once)."""
    store = Store(ctx.root / "build")
    docs = ctx.root / "docs"
    for lesson in ctx.outline.written:
        try:
            meta, _, _ = read_meta(docs / lesson.src, f"docs/{lesson.src}")
            lab = load_lab(ctx.root / "lab" / lesson.id / "lab.yml")
            run = page_run(store, lesson.id, meta.run)
        except ANSWERABLE:
            continue
        yield lesson, lab, run


def _anchor(ctx: PageContext, lesson: Lesson) -> str:
    href = html.escape(ctx.to_root() + lesson.url, quote=True)
    return f'<a href="{href}">{html.escape(lesson.number)} {html.escape(lesson.title)}</a>'


@macro
def lab_costs(ctx: PageContext) -> str:
    """A table: each lesson's GPU memory need, hands-on time, and its cost on the rented card at
    each dated price (community and secure cloud), the prices' dates and sources below."""
    rows: list[tuple[list[str], dict[str, str]]] = []
    seen: dict[tuple[str, str], Price] = {}
    head = "<tr><th>Lesson</th><th>GPU memory it needs</th><th>Hands-on</th><th>Card</th>"
    offers: list[str] = []
    for lesson, lab, run in _labs(ctx):
        spent = facts.hands_on(run, lab).total
        card = facts.rented_card(ctx.root, run, lab)
        need = facts.gpu_need(run, lab)
        memory = (
            f"{need.peak / 2**30:.1f} GiB"
            if need.peak
            else "any: its steps size themselves to the card"
            if need.sized
            else "not recorded"
        )
        if card is None:
            memory = "no GPU"
        prices = facts.card_prices(ctx.root, card) if card else []
        for price in prices:
            seen[(price.provider, price.offer)] = price
            if price.offer not in offers:
                offers.append(price.offer)
        costs = {p.offer: money(p.per_hour * spent / 3600, p.currency) for p in prices if card}
        cells = [
            _anchor(ctx, lesson),
            memory,
            html.escape(minutes_text(spent)),
            html.escape(facts.short_gpu(card)) if card else "any machine",
        ]
        rows.append((cells, costs))
    head += "".join(f"<th>{html.escape(offer)}</th>" for offer in offers) + "</tr>"
    body = "".join(
        "<tr>"
        + "".join(f"<td>{c}</td>" for c in cells)
        + "".join(f"<td>{html.escape(costs.get(offer, '–'))}</td>" for offer in offers)
        + "</tr>"
        for cells, costs in rows
    )
    sources = "; ".join(
        f'<a href="{html.escape(p.source, quote=True)}" rel="nofollow">{html.escape(p.provider)}'
        f"</a> {html.escape(p.offer)}: {money(p.per_hour, p.currency)} per hour, read "
        f"{p.date:%d %B %Y}"
        for p in seen.values()
    )
    note = f"<p>Prices: {sources}.</p>" if sources else ""
    return f'<table class="course-costs"><thead>{head}</thead><tbody>{body}</tbody></table>{note}'


@macro
def lab_installs(ctx: PageContext) -> str:
    """Per lesson: its zip, and the lines that unpack and install it, with an NVIDIA GPU and
    without one (PyTorch's CPU build first)."""
    parts = []
    for lesson, lab, run in _labs(ctx):
        name = f"{lesson.download_stem}.zip"
        link = html.escape(f"{ctx.to_root()}downloads/{name}", quote=True)
        gpu = "\n".join(get_files_commands(lab, run, name))
        block = f"<p>With an NVIDIA GPU:</p><pre><code>{html.escape(gpu)}</code></pre>"
        cpu = cpu_install_commands(lab, run)
        if cpu:
            top = name.removesuffix(".zip")
            lines = "\n".join([f"unzip {name} && cd {top}/lab", *cpu])
            block += f"<p>Without one:</p><pre><code>{html.escape(lines)}</code></pre>"
        title = html.escape(f"{lesson.number} {lesson.title}")
        parts.append(
            f'<details class="course-install"><summary>{title}</summary><p>The lesson: '
            f'{_anchor(ctx, lesson)}; its lab: <a href="{link}" download>{html.escape(name)}</a>'
            f"</p>{block}</details>"
        )
    return "\n".join(parts)
