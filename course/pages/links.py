"""Links between lessons, made from the outline: `lesson_link()`, "Read first" and "Next".

A link to a lesson is computed from its id, so that renaming a page or renumbering a part moves
every link with it. A lesson the outline announces but whose page is not written yet is named as
coming, never linked; `lesson_link()` to it, or to an id the outline does not know, is a problem
of the page that asks.
"""

from __future__ import annotations

import html

from ..errors import PageError
from .context import PageContext
from .macros import macro
from .outline import OUTLINE, Lesson, is_lesson_id


def href(ctx: PageContext, lesson: Lesson) -> str:
    """The relative address of a lesson's page from the page being built."""
    return ctx.to_root() + lesson.url


def lesson_anchor(ctx: PageContext, lesson: Lesson, text: str | None = None) -> str:
    """A link to a written lesson, or, for one still coming, to its entry in the course outline
    on the home page, marked as coming."""
    shown = html.escape(text or f"{lesson.number} {lesson.title}")
    if not lesson.written:
        entry = html.escape(f"{ctx.to_root() or './'}#lesson-{lesson.id}", quote=True)
        return f'<a class="course-coming" href="{entry}">{shown} (coming)</a>'
    target = html.escape(href(ctx, lesson), quote=True)
    return f'<a class="course-lesson-link" href="{target}">{shown}</a>'


@macro
def lesson_link(
    ctx: PageContext, lesson_id: str, text: str | None = None, number: bool = False
) -> str:
    """A link to another lesson by id, showing its title from the outline (`number=True`: with
    its number first; `text=`: other words); the build checks the id and that the page exists."""
    lesson = ctx.outline.lesson(lesson_id)
    if not lesson.written:
        raise PageError(
            f"lesson '{lesson_id}' ({lesson.number} {lesson.title}) is listed in docs/{OUTLINE} "
            f"but has no page yet (docs/{lesson.src}); link it once it is written"
        )
    return lesson_anchor(ctx, lesson, text or (None if number else lesson.title))


@macro
def lesson_number(ctx: PageContext, lesson_id: str) -> str:
    """A lesson's number from the outline, for prose: 'Lesson {{ lesson_number("kv-cache") }}'."""
    return html.escape(ctx.outline.lesson(lesson_id).number)


def read_first_items(ctx: PageContext) -> list[str]:
    """The page's "Read first" entries as Markdown: a lesson named by id becomes its link (or is
    shown as coming), with what to read it for after a colon when the entry says
    (`- kv-cache: how many bytes a token keeps`); a topic in words stays as written."""
    items = []
    for entry in ctx.meta.read_first:
        pairs = entry.items() if isinstance(entry, dict) else [(entry, None)]
        for key, why in pairs:
            shown = key
            if is_lesson_id(key):
                shown = lesson_anchor(ctx, ctx.outline.lesson(key.strip()))
            items.append(f"{shown}: {why}" if why else shown)
    return items


def next_block(ctx: PageContext) -> str:
    """The end of a lesson page: the next lesson in the outline (or that it is coming), and the
    way back to the course's outline.
    """
    this = ctx.outline.by_page(ctx.src)
    if this is None:
        return ""
    following = ctx.outline.after(this.id)
    home = html.escape(ctx.to_root() or "./", quote=True)
    back = f'<a href="{home}">the course outline</a>'
    if following is None:
        text = f"This is the last lesson so far. Back to {back}."
    elif following.written:
        text = f"Next: {lesson_anchor(ctx, following)}. Or back to {back}."
    else:
        order = [x.id for x in ctx.outline.lessons]
        later = [x for x in ctx.outline.written if order.index(x.id) > order.index(this.id)]
        then = f" Meanwhile: {lesson_anchor(ctx, later[0])}." if later else ""
        text = f"Next: {lesson_anchor(ctx, following)}.{then} Back to {back}."
    return f'<nav class="course-next" aria-label="Next in the course"><p>{text}</p></nav>'
