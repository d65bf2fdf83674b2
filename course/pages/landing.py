"""The landing page's outline: every part and lesson, what each costs, and the reader's progress.

`course_outline()` lists the outline's parts and lessons. A written lesson shows its summary,
reading and hands-on time, cost, the GPU and date its numbers come from and its downloads, all
computed as its page header computes them; a lesson still to write shows as coming. The reader's
progress per lesson and "continue where you left off" are filled in by `docs/assets/course.js`
from the answers the lesson pages keep in the browser; without JavaScript they stay hidden.

A lesson's reading time needs its page rendered: the macro leaves a mark
(`data-course-reading="<src>"`) that `fill_reading_times` replaces once every page of the build
has been rendered (mkdocs renders all pages' Markdown before it writes any HTML).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from ..lab.load import load_lab
from ..record.store import Store
from . import facts
from .choose import page_run
from .context import PageContext
from .faq import load_page_data
from .format import minutes_text
from .lessons import read_meta
from .macros import ANSWERABLE, macro
from .outline import Lesson

_READING = re.compile(
    r'(<span class="course-reading" data-course-reading="([^"]+)">)[^<]*(</span>)'
)


@macro
def course_outline(ctx: PageContext) -> str:
    """The course's parts and lessons with their facts, downloads and the reader's progress."""
    store = Store(ctx.root / "build")
    blocks = [
        '<p class="course-continue course-js-only" data-course-continue hidden>'
        '<a class="course-button course-button--primary" href=""></a></p>'
    ]
    for part in ctx.outline.parts:
        items = [_lesson(ctx, lesson, store) for lesson in part.lessons]
        blocks.append(
            f'<section class="course-part" aria-labelledby="part-{part.number}">'
            f'<h2 id="part-{part.number}">{html.escape(part.label)}</h2>'
            f'<ol class="course-lessons">{"".join(items)}</ol></section>'
        )
    return "\n".join(blocks)


def _lesson(ctx: PageContext, lesson: Lesson, store: Store) -> str:
    title = html.escape(f"{lesson.number} {lesson.title}")
    if not lesson.written:
        return (
            f'<li class="course-lesson course-lesson--coming" id="lesson-{lesson.id}">'
            f'<h3 class="course-lesson__title">{title}</h3>'
            '<p class="course-lesson__summary">Coming: this lesson is being written.</p></li>'
        )
    docs = ctx.root / "docs"
    base = ctx.to_root()
    page = html.escape(base + lesson.url, quote=True)
    try:
        meta, raw, _ = read_meta(docs / lesson.src, f"docs/{lesson.src}")
        run = page_run(store, lesson.id, meta.run)
        lab = load_lab(ctx.root / "lab" / lesson.id / "lab.yml")
        checks = list(load_page_data(docs, lesson.src, raw).checks)
    except ANSWERABLE:
        # The lesson's own page reports the same problem in the same build, once, by its name;
        # here the lesson is listed without its facts rather than reported a second time.
        return (
            f'<li class="course-lesson" id="lesson-{lesson.id}">'
            f'<h3 class="course-lesson__title"><a href="{page}">{title}</a></h3></li>'
        )
    hands_on = facts.hands_on(run, lab).total  # as the page header adds it
    gpu = facts.gpu_name(run)
    rented = facts.rented_card(ctx.root, run, lab)
    prices = facts.card_prices(ctx.root, rented) if rented else []
    cost = facts.cost_range(prices, rented, hands_on)
    stem = html.escape(base + "downloads/" + lesson.download_stem, quote=True)
    rows = [
        ("Reading", f'<span class="course-reading" data-course-reading="{lesson.src}">…</span>'),
        ("Hands-on", html.escape(minutes_text(hands_on))),
        (
            "Cost",
            html.escape(f"{cost} on an {facts.short_gpu(rented)}" if cost and rented else "no GPU")
            + f' (<a href="{base}before-you-start/">renting one</a>)',
        ),
        (
            "Numbers from",
            html.escape(f"{gpu or 'a machine without a GPU'}, {facts.checked_on(run)}"),
        ),
        (
            "Downloads",
            f'<a href="{stem}.zip" download>lab (zip)</a>, <a href="{stem}.pdf">page (PDF)</a>',
        ),
    ]
    facts_html = "".join(facts.fact_row(label, value) for label, value in rows)
    summary = (
        f'<p class="course-lesson__summary">{html.escape(meta.summary)}</p>' if meta.summary else ""
    )
    progress = (
        f'<p class="course-lesson__progress course-js-only" data-course-lesson-progress '
        f'data-total="{len(checks)}" hidden></p>'
        if checks
        else ""
    )
    return (
        f'<li class="course-lesson" id="lesson-{lesson.id}" data-course-lesson '
        f'data-page="{html.escape(lesson.url, quote=True)}" '
        f'data-checks="{html.escape(" ".join(checks), quote=True)}">'
        f'<h3 class="course-lesson__title"><a href="{page}">{title}</a></h3>{summary}'
        f'<dl class="course-facts course-facts--compact">{facts_html}</dl>{progress}</li>'
    )


def fill_reading_times(output: str, words_of: Callable[[str], int | None]) -> str:
    """The landing page's HTML with each lesson's reading time put in, from the words its page
    had once rendered (`words_of(src)`; None leaves the mark's text)."""

    def fill(match: re.Match[str]) -> str:
        words = words_of(match.group(2))
        if words is None:
            return match.group(0)
        minutes = minutes_text(facts.reading_minutes(words) * 60)
        return f"{match.group(1)}{minutes}{match.group(3)}"

    return _READING.sub(fill, output)
