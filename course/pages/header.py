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
    spent = facts.hands_on(run, page.lab)
    words = facts.prose_words(markdown)
    where = " · ".join(
        x for x in (meta.part, f"Lesson {meta.number}" if meta.number else None) if x
    )
    builds = list(page.lab.lab.builds) if page.lab else []
    rows = [
        facts.fact_row(
            "Reading", f"{minutes_text(facts.reading_minutes(words) * 60)} ({words:,} words)"
        ),
        facts.fact_row("Hands-on", html.escape(facts.hands_on_text(spent, builds))),
        facts.fact_row("Hardware and cost", hardware_and_cost(page, spent.total)),
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


BEFORE_YOU_START = "before-you-start/"
"""The learners' page on renting a GPU, connecting and getting a lab onto it (its URL from the
site's root; docs/before-you-start.md)."""


def hardware_and_cost(page: PageContext, seconds: float) -> str:
    """The card the numbers come from, the card a learner rents for the lab with its dated
    prices (the words of the offers explained), and what the hands-on part costs on it."""
    run, lab = page.run, page.lab
    recorded = facts.gpu_name(run)
    rented = facts.rented_card(page.root, run, lab)
    guide = f'<a href="{page.to_root()}{BEFORE_YOU_START}">Before you start</a>'
    if rented is None:
        return html.escape(facts.machine_text(run, lab))
    prices = facts.card_prices(page.root, rented.split(" × ")[-1])
    cost = facts.cost_text(prices, rented, seconds)
    ours = f"Our numbers come from an {html.escape(recorded)}. " if recorded else ""
    if rented == recorded:
        card = f"To run the lab yourself, rent the same card: {html.escape(cost)}"
    else:
        card = (
            f"To run the lab yourself, rent an {html.escape(facts.short_gpu(rented))} (24 GB), "
            f"which every step fits: {html.escape(cost)}"
        )
    return f"{ours}{card}{_price_sources(prices)}. How to rent one and connect: {guide}."


def _price_sources(prices: list[Price]) -> str:
    if not prices:
        return ""
    items = ", ".join(
        f'<a href="{html.escape(p.source, quote=True)}" rel="nofollow">'
        f"{html.escape(p.provider)}</a> {html.escape(_offer(p))}"
        f"{money(p.per_hour, p.currency)} (read {p.date:%d %b %Y})"
        for p in prices
    )
    words = [
        text for word, text in facts.OFFER_WORDS.items() if any(word in p.offer for p in prices)
    ]
    said = f"; {'; '.join(words)}" if words else ""
    return f' <span class="course-prices">(prices per GPU-hour: {items}{said})</span>'


def _offer(price: Price) -> str:
    """'community cloud ' from the offer 'RTX 4090, community cloud' (the part after the card)."""
    part = price.offer.split(", ", 1)[-1] if ", " in price.offer else ""
    return f"{part} " if part else ""


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
