"""The steps after an engine wrote the HTML, in the order `course build` runs them.

MkDocs runs each of them as a hook while it builds (`pages/mkdocs_adapter.py`); an engine without
hooks (Zensical) leaves them to the build, which runs them on the written site:

    page problems        every page's problems found while rendering, as one failure
    previous and next    the footer's links cut where they cross between the learners' and the
                         authors' side (and the head's rel=prev/next with them)
    reading times        the landing page's, from the words of each lesson page as rendered
    sitemap dates        each page's <lastmod>: a lesson's from the run it shows, else the build's
    social cards         a published site's card per page (the OpenGraph meta already names it)
    feed and robots.txt  a published site's Atom feed of lessons re-run and its robots.txt

Each step reads what the pages left in `pages.state.STATE` and the files under the site folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..errors import PageError
from ..pages.cards import write_card
from ..pages.lessons import PageEntry, learners_pages, scan
from ..pages.publishing import (
    crosses,
    page_additions,
    published_url,
    reading_times,
    site_files,
)
from ..pages.state import STATE, report


@dataclass
class Written:
    """A site an engine has written: the project, where the site is, the build's cache, and the
    site's configuration (`site_url`, `site_name`, `site_description`, `site_author`)."""

    root: Path
    site_dir: Path
    cache: Path
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str | None:
        """The site's real address, None for the placeholder."""
        return published_url(self.config.get("site_url"))

    def pages(self) -> list[tuple[PageEntry, Path]]:
        """Every page of docs/ with its HTML file in the site (those the engine wrote)."""
        found = []
        for entry in scan(self.root / "docs"):
            html = self.site_dir / entry.url / "index.html"
            if html.is_file():
                found.append((entry, html))
        return found


def page_problems(site: Written) -> None:
    """Stop the build with every problem the pages found."""
    problems = STATE.problems
    if problems:
        raise PageError(f"the site did not build:\n{report(problems)}")


_FOOTER_LINK = re.compile(
    r'\s*<a href="(?P<href>[^"]*)" class="md-footer__link md-footer__link--(?P<way>prev|next)"'
    r".*?</a>",
    re.DOTALL,
)
_HEAD_LINK = re.compile(r'\s*<link rel="(?P<way>prev|next)" href="(?P<href>[^"]*)">')
_EMPTY_FOOTER = re.compile(r'<nav class="md-footer__inner md-grid"[^>]*>\s*</nav>')


def previous_and_next(site: Written) -> None:
    """Cut previous/next wherever they would cross between the learners' and the authors' side."""
    learners = learners_pages(site.root / "docs")
    written = site.pages()
    by_url = {entry.url: entry.src for entry, _ in written}
    for entry, html in written:

        def keep(match: re.Match[str], src: str = entry.src, url: str = entry.url) -> str:
            target = urlsplit(urljoin(f"/{url}", match.group("href"))).path.lstrip("/")
            other = by_url.get(target)
            return "" if other is not None and crosses(src, other, learners) else match.group(0)

        text = html.read_text(encoding="utf-8")
        cut = _EMPTY_FOOTER.sub("", _HEAD_LINK.sub(keep, _FOOTER_LINK.sub(keep, text)))
        if cut != text:
            html.write_text(cut, encoding="utf-8")


def reading(site: Written) -> None:
    """The landing page's reading times."""
    for _, html in site.pages():
        text = html.read_text(encoding="utf-8")
        filled = reading_times(text)
        if filled != text:
            html.write_text(filled, encoding="utf-8")


_URL = re.compile(r"<url>\s*<loc>(?P<loc>[^<]*)</loc>(?:\s*<lastmod>[^<]*</lastmod>)?")


def build_date() -> str:
    """The build's date, as MkDocs dates pages: SOURCE_DATE_EPOCH's, else today's (UTC)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return when.strftime("%Y-%m-%d")


def sitemap_dates(site: Written) -> None:
    """Each sitemap entry's date: the run a lesson's page shows, the build's for another page."""
    sitemap = site.site_dir / "sitemap.xml"
    if not sitemap.is_file():
        return
    today = build_date()
    dates = {
        entry.url: page_additions(site.root, entry.src, dict(entry.raw)) or today
        for entry, _ in site.pages()
    }

    def dated(match: re.Match[str]) -> str:
        path = urlsplit(match.group("loc")).path
        base = urlsplit(str(site.config.get("site_url") or "/")).path or "/"
        url = path.removeprefix(base) if path.startswith(base) else path.lstrip("/")
        day = dates.get(url, today)
        return f"<url>\n         <loc>{match.group('loc')}</loc>\n         <lastmod>{day}</lastmod>"

    sitemap.write_text(_URL.sub(dated, sitemap.read_text(encoding="utf-8")), encoding="utf-8")


def social_cards(site: Written) -> None:
    """A published site's cards, drawn (or copied from the cache) where the pages name them."""
    if site.url is None:
        return
    for name, card in STATE.cards.items():
        write_card(card, site.site_dir / name, site.cache / "cards")


def feed_and_robots(site: Written) -> None:
    """A published site's feed and robots.txt."""
    if site.url is not None:
        site_files(site.root, site.site_dir, site.url, site.config)


Step = Callable[[Written], None]
AFTER_HTML: tuple[tuple[str, Step], ...] = (
    ("page problems", page_problems),
    ("previous and next", previous_and_next),
    ("reading times", reading),
    ("sitemap dates", sitemap_dates),
    ("social cards", social_cards),
    ("feed and robots.txt", feed_and_robots),
)
"""The steps after the HTML, in order, by name."""


def run_after(site: Written, done: frozenset[str]) -> None:
    """Run every step after the HTML that the engine did not (`done`: their names)."""
    for name, step in AFTER_HTML:
        if name not in done:
            step(site)
