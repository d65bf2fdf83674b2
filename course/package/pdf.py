"""The page PDF: a built lesson page's article, made lean and printed by WeasyPrint.

    site/<page>/index.html ─read_page()─> Page (the article's HTML, its images)
        ─key()─> a hash of every input: an unchanged page is not printed again
        ─prepare()─> PrintDocument (one HTML string, CSS inlined)
        ─render()─> site/downloads/<lesson>.pdf

`prepare` turns the page's header into a cover, drops what only works on screen (buttons, the
edit link, permalinks, scripts), turns each check into a worksheet question whose answer moves
to a section at the end, points figures at their PNG, prints listings as plain text and marks
outside links so the print stylesheet shows their address. `render` prints with a fetcher that
reads only files of the built site, under `SOURCE_DATE_EPOCH` and with the PDF dates taken from
the record, so two builds give the same bytes.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import string
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from ..errors import PageError
from ..pages.deferred import inline
from .document import Cover, Page, PrintDocument, PrintMeta, template
from .lean import ANSWERS_ID, ANSWERS_TITLE, SITE, Lean, attr, is_remote, resolve_image, serialise

_CODE = re.compile(r"(<code\b[^>]*>)(.*?)(</code>)", re.DOTALL)
_CODE_TAG = re.compile(r"</?(?:span|a)\b[^>]*>")
_IMG = re.compile(r"<img\b[^>]*>")
_ATTR = re.compile(r'\s([a-zA-Z-]+)="([^"]*)"')
_ARTICLE = re.compile(r'<article class="md-content__inner[^"]*">(.*)</article>', re.DOTALL)


def epoch_of(date: str) -> int:
    """Seconds since 1970 of an ISO 8601 time such as the record's `started`."""
    moment = datetime.fromisoformat(date)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def page_file(site_dir: Path, page_url: str) -> Path:
    """The built HTML file of a page URL (directory URLs: `<url>index.html`; else `<url>`)."""
    if page_url == "" or page_url.endswith("/"):
        return site_dir / page_url / "index.html"
    return site_dir / page_url


def read_page(site_dir: Path, page_url: str) -> Page:
    """A built page's article and images; PageError naming the page when it cannot be used.

    Only string work is done here (no parsing), so that an unchanged page costs little.
    """
    site_dir = site_dir.resolve()
    path = page_file(site_dir, page_url)
    shown = f"site/{path.relative_to(site_dir).as_posix()}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PageError(f"{shown}: no such page (was the HTML built?)") from None
    match = _ARTICLE.search(text)
    if match is None:
        raise PageError(
            f'{shown}: no <article class="md-content__inner"> (not a page Material built?)'
        )
    # The folded code blocks the screen fetches when unfolded are printed in full; listings lose
    # their colour tags: one inline box per token makes layout many times slower.
    article = _CODE.sub(
        lambda m: m.group(1) + _CODE_TAG.sub("", m.group(2)) + m.group(3),
        inline(match.group(1), path.parent, shown),
    )
    page = Page(path, site_dir, shown, article)
    for tag in _IMG.findall(article):
        attrs = {name: html.unescape(value) for name, value in _ATTR.findall(tag)}
        png = attrs.get("data-png")
        src = png or attrs.get("src", "")
        if is_remote(src):
            continue
        found = resolve_image(src, path, site_dir)
        if found is None:
            raise PageError(f"{shown}: image '{src}' is not in the built site")
        page.images.append(found)
        if (png or found.suffix.lower() == ".png") and found not in page.figures:
            page.figures.append(found)
    return page


def prepare(page: Page, fallback: Cover, meta: PrintMeta) -> PrintDocument:
    """The printable document of one page.

    The page's own header (`<header class="course-lesson-header">`) becomes the cover, so the PDF
    shows the facts exactly as the page does; `fallback` serves a page without one.
    """
    import tinyhtml5  # type: ignore[import-untyped]

    root = tinyhtml5.parse(
        f"<!DOCTYPE html><html><body><article>{page.article}</article></body></html>",
        namespace_html_elements=False,
    )
    article = next(root.iter("article"))
    lean = Lean(article, page, meta)
    lean.links()  # first, so the links in the header's facts are marked too
    cover = lean.cover(fallback)
    lean.clean()
    answers = lean.checks()
    lean.images()
    lean.code_blocks()
    body = (html.escape(article.text) if article.text else "") + "".join(
        serialise(c) for c in article
    )
    document = string.Template(template("print.html")).substitute(
        lang=attr(meta.language),
        title=html.escape(cover.title),
        author=attr(meta.author),
        description=attr(cover.summary or cover.title),
        keywords=attr(", ".join(meta.keywords)),
        date=attr(meta.date),
        css=template("print.css"),
        cover=cover_html(cover, meta) + contents_html(article, bool(answers)),
        body=body,
        answers=answers,
    )
    return PrintDocument(html=document, base_url=SITE + meta.page_url, checks=lean.check_count)


def contents_html(article: ET.Element, answers: bool = False) -> str:
    """A table of contents of the page's sections (its h2 headings), and the answers to the
    checks printed after them when there are some, each with its page number (print.css draws a
    dotted leader and `target-counter`)."""
    entries = []
    for heading in article.iter("h2"):
        anchor = heading.get("id")
        text = " ".join("".join(heading.itertext()).split()).removesuffix("¶").strip()
        if anchor and text:
            entries.append(f'<li><a href="#{attr(anchor)}">{html.escape(text)}</a></li>')
    if answers:  # lean.checks() gathers them at the end, outside the article
        entries.append(f'<li><a href="#{ANSWERS_ID}">{ANSWERS_TITLE}</a></li>')
    if len(entries) < 3:
        return ""
    return f'<nav class="print-toc"><h2>Contents</h2><ol>{"".join(entries)}</ol></nav>'


def cover_html(cover: Cover, meta: PrintMeta) -> str:
    """The cover block's HTML."""
    where = " · ".join(
        p for p in (cover.part, f"Lesson {cover.number}" if cover.number else None) if p
    )
    rows = "".join(
        f"<div><dt>{html.escape(label)}</dt><dd>{value}</dd></div>" for label, value in cover.facts
    )
    address = urljoin(meta.site_url, meta.page_url) if meta.site_url else ""
    note = f'<span class="print-course-name">{html.escape(meta.course)}</span>'
    if address:
        note += f' · <span class="print-page-address">{html.escape(address)}</span>'
    download = ""
    if meta.lab_zip:
        where_zip = urljoin(meta.site_url, meta.lab_zip) if meta.site_url else meta.lab_zip
        place = "" if meta.site_url else " on the course's site"
        download = (
            '<p class="print-cover__download">The lab, to run it yourself: '
            f"<code>{html.escape(where_zip)}</code>{place} (its START-HERE.md walks through every "
            "step).</p>"
        )
    parts = [
        '<header class="print-cover">',
        f'<p class="print-cover__part">{html.escape(where)}</p>' if where else "",
        f'<h1 class="print-cover__title">{html.escape(cover.title)}</h1>',
        f'<p class="print-cover__summary">{html.escape(cover.summary)}</p>'
        if cover.summary
        else "",
        f'<dl class="print-cover__facts">{rows}</dl>' if rows else "",
        download,
        f'<p class="print-cover__note">{note}</p>',
        "</header>",
    ]
    return "".join(parts)


class LocalFetcher:
    """Lets WeasyPrint read files of the built site and nothing else (no network, no other files).

    Addresses under `SITE` and `file:` URLs are read from inside the root folder; `data:` URLs are
    decoded; everything else is refused.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def __call__(self, url: str, *args: Any, **kwargs: Any) -> Any:
        return self.fetch(url)

    def fetch(self, url: str, headers: Any = None) -> Any:
        """The file's bytes when it lies inside the root; ValueError otherwise."""
        from weasyprint.urls import URLFetcherResponse  # type: ignore[import-untyped]

        parts = urlsplit(url)
        if parts.scheme == "data":
            from urllib.request import urlopen

            with urlopen(url) as response:
                return URLFetcherResponse(url, body=response.read())
        if url.startswith(SITE):
            path = (self.root / unquote(parts.path).lstrip("/")).resolve()
        elif parts.scheme == "file":
            path = Path(unquote(parts.path)).resolve()
        else:
            raise ValueError(
                f"refused to fetch {url}: a page PDF loads only files of the built site"
            )
        if not path.is_relative_to(self.root) or not path.is_file():
            raise ValueError(f"refused to fetch {url}: not a file inside {self.root}")
        return URLFetcherResponse(url, body=path.read_bytes())


@contextlib.contextmanager
def source_date_epoch(epoch: int) -> Iterator[None]:
    """Set SOURCE_DATE_EPOCH while printing: fontTools, deep inside WeasyPrint, reads the time it
    stamps into font subsets from the process environment, and nothing else reaches it."""
    before = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = before


def render(
    document: PrintDocument,
    target: Path,
    site_dir: Path,
    epoch: int,
    cache: dict[str, Any] | None = None,
) -> int:
    """Print the document to `target` (through a temporary file); returns its page count."""
    import logging

    import weasyprint  # type: ignore[import-untyped]

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    # WeasyPrint warns about every CSS property it does not know; only errors matter here.
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    with source_date_epoch(epoch):
        rendered = weasyprint.HTML(
            string=document.html, base_url=document.base_url, url_fetcher=LocalFetcher(site_dir)
        ).render(optimize_images=True, cache=cache if cache is not None else {})
        rendered.write_pdf(tmp)
    os.replace(tmp, target)
    return len(rendered.pages)
