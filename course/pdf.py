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
import copy
import hashlib
import html
import os
import posixpath
import re
import string
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from . import environ
from .errors import PageError
from .records import sha256_file

# Bump when the way a PDF is made changes, so cached PDFs are not reused.
FORMAT = "pdf-2"
# The address the document gives the built site. WeasyPrint names each image after its URL in
# the PDF, so a real file path would make two checkouts print different bytes; `LocalFetcher`
# serves this prefix from site/ and nothing else.
SITE = "https://site.invalid/"
# What a printed page has no use for: Material's edit button, permalinks, copy buttons, feedback
# form and source-file footer; our widgets' screen-only parts; anything marked course-no-print.
DROP = (
    "script", "noscript", "style", "button", "input", "select", "textarea", "nav",
    ".md-content__button", ".headerlink", ".md-clipboard", ".md-source-file", ".md-feedback",
    ".course-js-only", ".course-no-print", ".course-progress", ".course-downloads",
    ".course-check__why", ".course-check__measured", ".course-check__result",
)
# Header facts that only make sense on screen (the PDF is itself one of the downloads).
SCREEN_FACTS = {"downloads", "progress"}
# A code block of at most this many lines is kept on one page (an A4 page holds about 70).
KEEP_LINES = 60
_ARTICLE = re.compile(r'<article class="md-content__inner[^"]*">(.*)</article>', re.DOTALL)
_CODE = re.compile(r"(<code\b[^>]*>)(.*?)(</code>)", re.DOTALL)
_CODE_TAG = re.compile(r"</?(?:span|a)\b[^>]*>")
_IMG = re.compile(r"<img\b[^>]*>")
_ATTR = re.compile(r'\s([a-zA-Z-]+)="([^"]*)"')


@dataclass(frozen=True)
class Cover:
    """The cover block: where the lesson sits, its title, one sentence and the header facts."""

    title: str
    part: str | None = None
    """e.g. 'Part 2 · The maths of one request'."""
    number: str | None = None
    """The lesson number, e.g. '2.4'."""
    summary: str | None = None
    """One sentence: what the reader will learn and measure."""
    facts: tuple[tuple[str, str], ...] = ()
    """(label, HTML) pairs: time, GPU and cost, checked-on date."""


@dataclass(frozen=True)
class PrintMeta:
    """What the PDF says about itself, and where the page lives on the site."""

    author: str
    """The PDF's author (mkdocs `site_author`, else the site name)."""
    course: str
    """The course's name, printed in the page margins."""
    date: str
    """The record's start, ISO 8601 UTC (`2026-11-29T10:12:33Z`): the PDF's dates."""
    page_url: str
    """The page's URL relative to the site root, e.g. `part-2/kv-cache/`."""
    site_url: str | None = None
    """The published site's address, to make links to other pages absolute."""
    language: str = "en"
    keywords: tuple[str, ...] = ()


@dataclass
class Page:
    """A built page as the PDF needs it: its article's HTML and the local images it shows."""

    path: Path
    site_dir: Path
    shown: str
    """The page as messages name it, e.g. `site/part-2/kv-cache/index.html`."""
    article: str
    """The inside of `<article class="md-content__inner">`, listings' colour tags removed."""
    images: list[Path] = field(default_factory=list)
    """Local image files, in page order."""
    figures: list[Path] = field(default_factory=list)
    """The page's figures as PNG, in page order (the zip ships them)."""

    def key(self, fallback: Cover, meta: PrintMeta) -> str:
        """A hash of everything the PDF is made from: page, cover, stylesheet, images, printer."""
        digest = hashlib.sha256()
        for part in (FORMAT, _weasyprint_version(), repr(fallback), repr(meta), _template("print.html"),
                     _template("print.css"), self.article):
            digest.update(part.encode("utf-8") + b"\0")
        for path in self.images:
            digest.update(path.name.encode() + b"\0" + sha256_file(path).encode())
        return digest.hexdigest()


@dataclass
class PrintDocument:
    """A page ready to print: the lean HTML and where its relative addresses point."""

    html: str
    base_url: str
    checks: int = 0
    """How many checks were printed with their answers at the end."""


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
        raise PageError(f"{shown}: no <article class=\"md-content__inner\"> (not a page Material built?)")
    # Listings lose their colour tags: one inline box per token makes layout many times slower.
    article = _CODE.sub(lambda m: m.group(1) + _CODE_TAG.sub("", m.group(2)) + m.group(3), match.group(1))
    page = Page(path, site_dir, shown, article)
    for tag in _IMG.findall(article):
        attrs = {name: html.unescape(value) for name, value in _ATTR.findall(tag)}
        png = attrs.get("data-png")
        src = png or attrs.get("src", "")
        if _is_remote(src):
            continue
        found = resolve_image(src, path, site_dir)
        if found is None:
            raise PageError(f"{shown}: image '{src}' is not in the built site")
        page.images.append(found)
        if (png or found.suffix.lower() == ".png") and found not in page.figures:
            page.figures.append(found)
    return page


def resolve_image(src: str, page: Path, site_dir: Path) -> Path | None:
    """A page-relative or site-absolute image address as a file inside site/, else None."""
    path = unquote(urlsplit(src).path)
    if not path:
        return None
    for candidate in (page.parent / path, site_dir / path.lstrip("/")):
        resolved = candidate.resolve()
        if resolved.is_relative_to(site_dir) and resolved.is_file():
            return resolved
    return None


def prepare(page: Page, fallback: Cover, meta: PrintMeta) -> PrintDocument:
    """The printable document of one page.

    The page's own header (`<header class="course-lesson-header">`) becomes the cover, so the PDF
    shows the facts exactly as the page does; `fallback` serves a page without one.
    """
    import tinyhtml5  # type: ignore[import-untyped]

    root = tinyhtml5.parse(f"<!DOCTYPE html><html><body><article>{page.article}</article></body></html>",
                           namespace_html_elements=False)
    article = next(root.iter("article"))
    lean = _Lean(article, page, meta)
    lean.links()  # first, so the links in the header's facts are marked too
    cover = lean.cover(fallback)
    lean.clean()
    answers = lean.checks()
    lean.images()
    lean.code_blocks()
    body = (html.escape(article.text) if article.text else "") + "".join(_serialise(c) for c in article)
    document = string.Template(_template("print.html")).substitute(
        lang=_attr(meta.language),
        title=html.escape(cover.title),
        author=_attr(meta.author),
        description=_attr(cover.summary or cover.title),
        keywords=_attr(", ".join(meta.keywords)),
        date=_attr(meta.date),
        css=_template("print.css"),
        cover=cover_html(cover, meta),
        body=body,
        answers=answers,
    )
    return PrintDocument(html=document, base_url=SITE + meta.page_url, checks=lean.check_count)


def cover_html(cover: Cover, meta: PrintMeta) -> str:
    """The cover block's HTML."""
    where = " · ".join(p for p in (cover.part, f"Lesson {cover.number}" if cover.number else None) if p)
    rows = "".join(f"<div><dt>{html.escape(label)}</dt><dd>{value}</dd></div>" for label, value in cover.facts)
    address = urljoin(meta.site_url, meta.page_url) if meta.site_url else ""
    note = f'<span class="print-course-name">{html.escape(meta.course)}</span>'
    if address:
        note += f' · <span class="print-page-address">{html.escape(address)}</span>'
    parts = [
        '<header class="print-cover">',
        f'<p class="print-cover__part">{html.escape(where)}</p>' if where else "",
        f'<h1 class="print-cover__title">{html.escape(cover.title)}</h1>',
        f'<p class="print-cover__summary">{html.escape(cover.summary)}</p>' if cover.summary else "",
        f'<dl class="print-cover__facts">{rows}</dl>' if rows else "",
        f'<p class="print-cover__note">{note}</p>',
        "</header>",
    ]
    return "".join(parts)


class _Lean:
    """The article being made printable, with a map from each element to its parent."""

    def __init__(self, article: ET.Element, page: Page, meta: PrintMeta) -> None:
        self.article = article
        self.page = page
        self.meta = meta
        self.check_count = 0
        self.parents = {child: parent for parent in article.iter() for child in parent}

    def select(self, *selectors: str, within: ET.Element | None = None) -> list[ET.Element]:
        """Elements matching any of `tag`, `.class` or `tag.class`, in document order."""
        wanted = [tuple(s.split(".", 1)) if "." in s else (s, "") for s in selectors]
        found = []
        for element in (within if within is not None else self.article).iter():
            classes = element.get("class", "").split() if isinstance(element.tag, str) else []
            for tag, cls in wanted:
                if (not tag or element.tag == tag) and (not cls or cls in classes):
                    found.append(element)
                    break
        return found

    def remove(self, element: ET.Element) -> None:
        """Take an element out, keeping the text that followed it."""
        parent = self.parents.get(element)
        if parent is None or element not in list(parent):
            return
        index = list(parent).index(element)
        if element.tail:
            if index > 0:
                before = parent[index - 1]
                before.tail = (before.tail or "") + element.tail
            else:
                parent.text = (parent.text or "") + element.tail
        parent.remove(element)

    def cover(self, fallback: Cover) -> Cover:
        """The page's header as a cover (taken out of the article); the fallback without one."""
        header = next(iter(self.select("header.course-lesson-header")), None)
        if header is None:
            return fallback

        def first(selector: str) -> ET.Element | None:
            return next(iter(self.select(selector, within=header)), None)

        kicker, title, summary = first(".course-kicker"), first("h1"), first(".course-summary")
        facts = []
        for facts_list in self.select("dl.course-facts", within=header):
            for row in facts_list:
                label, value = row.find("dt"), row.find("dd")
                if label is None or value is None or _text(label).lower() in SCREEN_FACTS:
                    continue
                inner = (html.escape(value.text) if value.text else "") + "".join(_serialise(c) for c in value)
                facts.append((_text(label), inner))
        self.remove(header)
        return Cover(
            title=_text(title) if title is not None else fallback.title,
            part=_text(kicker) if kicker is not None else fallback.part,
            summary=_text(summary) if summary is not None else fallback.summary,
            facts=tuple(facts) or fallback.facts,
        )

    def clean(self) -> None:
        """Drop what only works on screen, and the page's own h1 (the cover holds the title)."""
        for element in self.select(*DROP):
            self.remove(element)
        first = next((e for e in self.article.iter() if e.tag in ("h1", "h2", "h3", "p", "div")), None)
        if first is not None and first.tag == "h1":
            self.remove(first)
        for element in self.article.iter():
            for name in ("hidden", "loading", "tabindex"):  # what survived DROP is meant to be read
                element.attrib.pop(name, None)

    def checks(self) -> str:
        """Number the checks, strip their controls and gather their answers into an end section."""
        answers = []
        for number, check in enumerate(self.select("div.course-check"), start=1):
            anchor = f"print-answer-{number}"
            legend = next(check.iter("legend"), None)
            question = _text(legend) if legend is not None else f"Check {number}"
            if legend is not None:
                tag = ET.Element("span", {"class": "print-check-number"})
                tag.text, tag.tail, legend.text = f"Check {number}. ", legend.text, None
                legend.insert(0, tag)
            details = self.select("details.course-check__answer", within=check)
            for block in details:
                self.remove(block)
            ref = ET.SubElement(check, "p", {"class": "print-answer-ref"})
            ET.SubElement(ref, "a", {"href": f"#{anchor}"}).text = "Answer at the end"
            for label in check.iter("label"):
                label.attrib.pop("for", None)  # its radio button is gone
            answer = ET.Element("div", {"class": "print-answer", "id": anchor})
            ET.SubElement(answer, "h3").text = f"Check {number}"
            ET.SubElement(answer, "p", {"class": "print-answer__question"}).text = _strip_kind(question)
            for block in details:
                answer.extend(copy.deepcopy(child) for child in block if child.tag != "summary")
            answers.append(_serialise(answer))
            self.check_count = number
        if not answers:
            return ""
        return ('<section class="print-answers"><h2 id="print-answers">Answers to the checks</h2>'
                + "".join(answers) + "</section>")

    def images(self) -> None:
        """Point each image at its file under the site address (figures at their PNG); a remote
        image becomes its alt text, since printing fetches nothing from the network."""
        for img in list(self.article.iter("img")):
            src = img.get("data-png") or img.get("src") or ""
            if _is_remote(src):
                span = ET.Element("span", {"class": "print-missing-image"})
                span.text, span.tail = f"[image: {img.get('alt') or src}]", img.tail
                parent = self.parents[img]
                parent.insert(list(parent).index(img), span)
                parent.remove(img)
                continue
            found = resolve_image(src, self.page.path, self.page.site_dir)
            if found is not None:
                img.set("src", SITE + found.relative_to(self.page.site_dir).as_posix())
            for name in ("data-png", "srcset"):
                img.attrib.pop(name, None)

    def code_blocks(self) -> None:
        """Keep a code block that fits on a page on one page; let a longer one break where it
        falls (rather than have the printer first push it whole onto the next page)."""
        for pre in self.select("pre"):
            lines = "".join(pre.itertext()).count("\n") + 1
            if lines > KEEP_LINES:
                continue
            block = self.parents.get(pre)
            target = pre
            if block is not None and {"highlight", "course-terminal"} & set(block.get("class", "").split()):
                target = block
            target.set("class", (target.get("class", "") + " print-keep").strip())

    def links(self) -> None:
        """Keep links clickable: outside ones show their address, other pages' become absolute.

        Without a published site address a link to another page cannot work from a PDF, so it
        is printed as plain text.
        """
        for link in self.article.iter("a"):
            href = link.get("href")
            if not href or href.startswith("#"):
                continue
            parts = urlsplit(href)
            if parts.scheme in ("http", "https", "mailto"):
                if _text(link) != href:
                    link.set("class", (link.get("class", "") + " print-external").strip())
                continue
            if parts.scheme:
                continue
            target = _site_path(self.meta.page_url, href)
            if not parts.path or target.split("#")[0].rstrip("/") == self.meta.page_url.rstrip("/"):
                link.set("href", f"#{parts.fragment}" if parts.fragment else "#")
            elif self.meta.site_url:
                link.set("href", urljoin(self.meta.site_url, target))
                link.set("class", (link.get("class", "") + " print-external").strip())
            else:
                del link.attrib["href"]


def _site_path(page_url: str, href: str) -> str:
    """A link relative to a page as a path relative to the site root (query and fragment kept)."""
    parts = urlsplit(href)
    base = posixpath.dirname(page_url + "x")
    path = posixpath.normpath(posixpath.join(base, parts.path)) if parts.path else page_url
    if parts.path.endswith("/") and not path.endswith("/"):
        path += "/"
    path = "" if path in (".", "./") else path
    suffix = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return path + suffix


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
            raise ValueError(f"refused to fetch {url}: a page PDF loads only files of the built site")
        if not path.is_relative_to(self.root) or not path.is_file():
            raise ValueError(f"refused to fetch {url}: not a file inside {self.root}")
        return URLFetcherResponse(url, body=path.read_bytes())


def source_date_epoch(epoch: int) -> contextlib.AbstractContextManager[None]:
    """Set SOURCE_DATE_EPOCH while printing (fontTools stamps font subsets with it)."""
    return environ.variable("SOURCE_DATE_EPOCH", str(epoch))


def render(document: PrintDocument, target: Path, site_dir: Path, epoch: int,
           cache: dict[str, Any] | None = None) -> int:
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


def _serialise(node: ET.Element) -> str:
    return ET.tostring(node, encoding="unicode", method="html")


def _text(element: ET.Element) -> str:
    return " ".join("".join(element.itertext()).split())


def _strip_kind(question: str) -> str:
    """A check's question without its leading kind label ('Predict, then measure.')."""
    for label in ("Check your understanding.", "Predict, then measure."):
        if question.startswith(label):
            return question[len(label):].strip()
    return question


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _is_remote(src: str) -> bool:
    return urlsplit(src).scheme in ("http", "https", "ftp") or src.startswith("//")


def _weasyprint_version() -> str:
    from importlib.metadata import version

    return version("weasyprint")


def _template(name: str) -> str:
    return resources.files("course").joinpath("templates", name).read_text(encoding="utf-8")

