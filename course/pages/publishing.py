"""What makes the site a course, whichever engine builds it: its two sides, and what a published
site carries.

Two sides (always): the learners' side (the home page and the outline's lessons) and the authors'
side. Previous/next never cross from one to the other, and the authors' pages stay out of the
search index. A lesson's sitemap date is the date of the run it shows; a page's description is its
summary; the landing page gets each lesson's reading time once every page has been rendered.

A published site (its `site_url` a real address, not the `.invalid` placeholder) also gets, per
page, OpenGraph and Twitter meta with a social card (`cards.py`), and, for the site, `robots.txt`
and the Atom feed of lessons re-run (`feed.py`). `course publish` refuses the placeholder, so
what it builds always has them.

The MkDocs adapter calls these from its hooks; for an engine without hooks, the site's build
calls them around the engine (`course/site/after.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..errors import CourseError
from ..record.store import Store
from .cards import Card
from .choose import page_run
from .feed import FEED, atom, feed_entries
from .landing import fill_reading_times
from .lessons import learners_pages
from .outline import AUTHORS, load_outline
from .state import STATE, words_of

CARDS_CACHE = Path(".cache") / "cards"


def published_url(site_url: object) -> str | None:
    """The site's address when it is a real one (ending in '/'), None for the placeholder."""
    url = str(site_url or "")
    if not url or (urlsplit(url).hostname or "").endswith(".invalid"):
        return None
    return url if url.endswith("/") else url + "/"


def crosses(src: str, other: str, learners: set[str]) -> bool:
    """Whether a link from page `src` to page `other` (paths in docs/) goes from one side of the
    course to the other (`learners`: the learners' pages)."""
    return (src in learners) != (other in learners)


def page_additions(root: Path, src: str, meta: dict[str, Any]) -> str | None:
    """Per page, into its front matter `meta`: out of the search index when it is an authors'
    page, its summary as its description; the date (YYYY-MM-DD) of the run a lesson's page shows,
    for its sitemap entry (None for another page, or when the run is missing: the page's own
    macros report that, with the page's name)."""
    docs = root / "docs"
    if src not in learners_pages(docs):
        meta.setdefault("search", {"exclude": True})
    if meta.get("summary") and not meta.get("description"):
        meta["description"] = " ".join(str(meta["summary"]).split())
    lesson = load_outline(docs).by_page(src)
    lesson_id = lesson.id if lesson is not None else meta.get("lesson")
    if not lesson_id:
        return None
    try:
        run = page_run(Store(root / "build"), str(lesson_id), meta.get("run"))
    except CourseError:
        return None
    return run.record.started[:10]


def card_for(
    root: Path, src: str, title: str | None, meta: dict[str, Any], config: dict[str, Any]
) -> Card:
    """What a page's social card shows (`title`: the engine's title of the page; `config`: the
    site's `site_name` and `site_description`)."""
    docs = root / "docs"
    site = str(config.get("site_name") or "")
    lesson = load_outline(docs).by_page(src)
    ctx = STATE.pages.get(src)
    if lesson is not None:
        headline = ctx.headline if ctx is not None else None
        label = ctx.meta.headline.label if ctx is not None and ctx.meta.headline else None
        kicker = f"{lesson.part} · Lesson {lesson.number}"
        return Card(lesson.title, kicker, headline, label if headline else None, site)
    summary = str(meta.get("summary") or config.get("site_description") or "")
    kicker = site if src in learners_pages(docs) else f"{site} · {AUTHORS}"
    shown = str(meta.get("title") or title or site)
    return Card(shown, kicker, None, " ".join(summary.split()) or None, site)


def opengraph(
    root: Path,
    src: str,
    card: Card,
    card_path: str,
    page_address: str,
    description: str,
    url: str,
) -> dict[str, str]:
    """A page's OpenGraph and Twitter data (`page_address`: its whole URL; `card_path`: its card's
    path in the site; `url`: the site's address), as `overrides/main.html` shows it."""
    lesson = load_outline(root / "docs").by_page(src)
    return {
        "type": "article" if lesson else "website",
        "title": card.title,
        "description": description,
        "url": page_address,
        "image": urljoin(url, card_path),
        "image_alt": card.alt,
        "feed": urljoin(url, FEED),
    }


def reading_times(output: str) -> str:
    """A page's HTML with each lesson's reading time put in (the landing page), from the words
    of the lesson pages this build rendered."""
    if "data-course-reading" not in output:
        return output
    return fill_reading_times(output, words_of)


def site_files(root: Path, site_dir: Path, url: str, config: dict[str, Any]) -> None:
    """A published site's robots.txt and the feed of lessons re-run (`config`: the site's
    `site_name` and `site_author`)."""
    (site_dir / "robots.txt").write_text(
        f"User-agent: *\nAllow: /\n\nSitemap: {urljoin(url, 'sitemap.xml')}\n", encoding="utf-8"
    )
    entries = feed_entries(load_outline(root / "docs"), Store(root / "build"), url)
    name = str(config.get("site_name") or "")
    author = str(config.get("site_author") or name)
    (site_dir / FEED).write_text(atom(url, name, author, entries), encoding="utf-8")
