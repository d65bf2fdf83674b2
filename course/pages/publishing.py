"""The mkdocs hooks that make the site a course: its two sides, and what a published site carries.

Two sides (always): the learners' side (the home page and the outline's lessons) and the authors'
side. Previous/next never cross from one to the other, and the authors' pages stay out of the
search index. A lesson's sitemap date is the date of the run it shows; a page's description is its
summary; the landing page gets each lesson's reading time once every page has been rendered.

A published site (its `site_url` a real address, not the `.invalid` placeholder) also gets, per
page, OpenGraph and Twitter meta with a social card (`cards.py`), and, for the site, `robots.txt`
and the Atom feed of lessons re-run (`feed.py`). `course publish` refuses the placeholder, so
what it builds always has them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..errors import CourseError
from ..record.store import Store
from .cards import Card, card_name, write_card
from .choose import page_run
from .feed import FEED, atom, feed_entries
from .landing import fill_reading_times
from .lessons import learners_pages
from .outline import AUTHORS, load_outline
from .plugin import STATE

CARDS_CACHE = Path(".cache") / "cards"


def published_url(config: Any) -> str | None:
    """The site's address when it is a real one (ending in '/'), None for the placeholder."""
    url = str(config.get("site_url") or "")
    if not url or (urlsplit(url).hostname or "").endswith(".invalid"):
        return None
    return url if url.endswith("/") else url + "/"


def _root(config: Any) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_nav(nav: Any, config: Any, files: Any) -> Any:
    """Cut previous/next wherever they would cross between the learners' and the authors' side."""
    learners = learners_pages(Path(config["docs_dir"]))
    for page in nav.pages:
        side = page.file.src_uri in learners
        if page.next_page is not None and (page.next_page.file.src_uri in learners) != side:
            page.next_page = None
        if page.previous_page is not None and (page.previous_page.file.src_uri in learners) != side:
            page.previous_page = None
    return nav


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Per page: out of the search index when it is an authors' page, its summary as its
    description, and a lesson's sitemap date from the run it shows."""
    docs = Path(config["docs_dir"])
    src = page.file.src_uri
    meta = page.meta
    if src not in learners_pages(docs):
        meta.setdefault("search", {"exclude": True})
    if meta.get("summary") and not meta.get("description"):
        meta["description"] = " ".join(str(meta["summary"]).split())
    lesson = load_outline(docs).by_page(src)
    lesson_id = lesson.id if lesson is not None else meta.get("lesson")
    if lesson_id:
        try:
            run = page_run(Store(_root(config) / "build"), str(lesson_id), meta.get("run"))
        except CourseError:
            return markdown  # the page's own macros report the missing run, with the page's name
        page.update_date = run.record.started[:10]
    return markdown


def card_for(page: Any, config: Any) -> Card:
    """What a page's social card shows."""
    docs = Path(config["docs_dir"])
    src = page.file.src_uri
    site = str(config.get("site_name") or "")
    lesson = load_outline(docs).by_page(src)
    ctx = STATE.pages.get(src)
    if lesson is not None:
        headline = ctx.headline if ctx is not None else None
        label = ctx.meta.headline.label if ctx is not None and ctx.meta.headline else None
        kicker = f"{lesson.part} · Lesson {lesson.number}"
        return Card(lesson.title, kicker, headline, label if headline else None, site)
    summary = str(page.meta.get("summary") or config.get("site_description") or "")
    kicker = site if src in learners_pages(docs) else f"{site} · {AUTHORS}"
    title = str(page.meta.get("title") or page.title or site)
    return Card(title, kicker, None, " ".join(summary.split()) or None, site)


def on_page_context(context: Any, page: Any, config: Any, nav: Any) -> Any:
    """On a published site: the page's social card, drawn (or reused), and its OpenGraph data."""
    url = published_url(config)
    if url is None:
        return context
    card = card_for(page, config)
    name = card_name(page.url)
    cache = STATE.cards_cache or _root(config) / CARDS_CACHE
    write_card(card, Path(config["site_dir"]) / name, cache)
    description = str(page.meta.get("description") or config.get("site_description") or "")
    page.meta["course_og"] = {
        "type": "article"
        if load_outline(Path(config["docs_dir"])).by_page(page.file.src_uri)
        else "website",
        "title": card.title,
        "description": description,
        "url": page.canonical_url or urljoin(url, page.url),
        "image": urljoin(url, name),
        "image_alt": card.alt,
        "feed": urljoin(url, FEED),
    }
    return context


def on_post_page(output: str, page: Any, config: Any) -> str:
    """The landing page's reading times, from the words of the lesson pages once rendered."""
    if "data-course-reading" not in output:
        return output

    def words_of(src: str) -> int | None:
        ctx = STATE.pages.get(src)
        return ctx.words if ctx is not None else None

    return fill_reading_times(output, words_of)


def on_post_build(config: Any) -> None:
    """On a published site: robots.txt and the feed of lessons re-run."""
    url = published_url(config)
    if url is None:
        return
    site_dir = Path(config["site_dir"])
    (site_dir / "robots.txt").write_text(
        f"User-agent: *\nAllow: /\n\nSitemap: {urljoin(url, 'sitemap.xml')}\n", encoding="utf-8"
    )
    docs = Path(config["docs_dir"])
    entries = feed_entries(load_outline(docs), Store(_root(config) / "build"), url)
    name = str(config.get("site_name") or "")
    author = str(config.get("site_author") or name)
    (site_dir / FEED).write_text(atom(url, name, author, entries), encoding="utf-8")
