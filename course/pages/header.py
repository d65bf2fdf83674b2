"""A lesson page's header: where it sits, its title, its facts, the reader's progress, outcomes.

Everything in it is computed from the front matter, the record, the lab recipe and the price
file; nothing is typed. It is prepended to the page's Markdown, so it is part of the article
(and of the PDF).
"""

from __future__ import annotations

import html

from ..lab.facts import Price
from ..lab.files import lab_files
from . import facts
from .context import PageContext
from .format import minutes_text, money
from .links import read_first_items


def lesson_header(page: PageContext, markdown: str) -> str:
    """The header's HTML followed by the outcomes and read-first lists as Markdown."""
    meta = page.meta
    run = page.run
    steps, install, download = facts.hands_on_seconds(run, page.lab)
    typing = facts.typing_seconds(page.lab)
    hands_on = steps + install + download + typing
    words = facts.prose_words(markdown)
    gpu = facts.gpu_name(run)
    cost, prices = facts.cost_text(facts.load_prices(page.root), gpu, hands_on)
    where = " · ".join(
        x for x in (meta.part, f"Lesson {meta.number}" if meta.number else None) if x
    )

    rows = [
        facts.fact_row(
            "Reading", f"{minutes_text(facts.reading_minutes(words) * 60)} ({words:,} words)"
        ),
        facts.fact_row(
            "Hands-on", html.escape(facts.hands_on_text(steps, install, download, typing))
        ),
        facts.fact_row(
            "Hardware and cost",
            f"{html.escape(gpu)}: {html.escape(cost)}{_price_sources(prices)}"
            if gpu
            else html.escape(facts.machine_text(run, page.lab)),
        ),
        facts.fact_row(
            "Checked on",
            f"{facts.checked_on(run)}, with {html.escape(facts.engine_text(run))} "
            f"(run <code>{html.escape(run.run_id)}</code>)",
        ),
    ]
    downloads = _downloads(page)
    if downloads:
        rows.append(facts.fact_row("Downloads", downloads))
    total = len(page.data.checks)
    progress = ""
    if total:
        noun = "check" if total == 1 else "checks"
        progress = (
            f'<div class="course-progress" data-course-progress data-total="{total}">'
            f'<p><span class="course-progress__count" aria-live="polite">0 of {total} {noun} '
            "answered right</span>."
            f' <span class="course-progress__note">Only your first answer to each check counts; '
            "your answers "
            f"stay in this browser.</span> "
            f'<button type="button" class="course-progress__reset course-js-only">Reset my '
            "answers</button></p>"
            f"</div>"
        )
    header = (
        f'<header class="course-lesson-header" '
        f'data-lesson="{html.escape(page.lesson, quote=True)}" '
        f'data-run="{html.escape(run.run_id, quote=True)}">'
        + (f'<p class="course-kicker">{html.escape(where)}</p>' if where else "")
        + f"<h1>{html.escape(meta.title or page.lesson)}</h1>"
        + (f'<p class="course-summary">{html.escape(meta.summary)}</p>' if meta.summary else "")
        + f'<dl class="course-facts">{"".join(rows)}</dl>{progress}</header>'
    )
    after = []
    if meta.outcomes:
        after.append(
            "**After this lesson you will be able to:**\n\n"
            + "\n".join(f"- {o}" for o in meta.outcomes)
        )
    if meta.read_first:
        after.append("**Read first:** " + ", ".join(read_first_items(page)) + ".")
    if after:
        header += (
            '\n\n<div class="course-outcomes" markdown="1">\n\n' + "\n\n".join(after) + "\n\n</div>"
        )
    return header


def _price_sources(prices: list[Price]) -> str:
    if not prices:
        return ""
    items = ", ".join(
        f'<a href="{html.escape(p.source, quote=True)}" '
        f'rel="nofollow">{html.escape(p.provider)}</a> '
        f"{money(p.per_hour, p.currency)} ({p.date:%d %b %Y})"
        for p in prices
    )
    return f' <span class="course-prices">(prices per GPU-hour: {items})</span>'


def _downloads(page: PageContext) -> str:
    """Links to the lesson's zip and PDF (named by its number), or '' for a lesson the outline
    does not list (it has no downloads)."""
    listed = [x for x in page.outline.lessons if x.id == page.lesson]
    if not listed:
        return ""
    base = page.to_root()
    stem = html.escape(listed[0].download_stem, quote=True)
    files = lab_files(page.root / "lab" / page.lesson)
    shown = ", ".join(f"<code>{html.escape(f)}</code>" for f in files[:8])
    more = f" and {len(files) - 8} more" if len(files) > 8 else ""
    return (
        f'<a href="{base}downloads/{stem}.zip" download>the lab (zip)</a>, with START-HERE.md '
        "and the "
        f"lab's {len(files)} files ({shown}{more}); "
        f'<a href="{base}downloads/{stem}.pdf">this page (PDF)</a>'
    )
