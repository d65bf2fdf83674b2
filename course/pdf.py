"""The page PDF: a built lesson page's article, made lean and printed by WeasyPrint.

    site/<page>/index.html ──prepare()──> PrintDocument (one HTML string, CSS inlined, the local
                                          files it loads) ──render()──> site/downloads/<lesson>.pdf

`prepare` takes the `<article>` Material wrote, drops what only works on screen (buttons, the
edit link, permalinks, script), turns each check into a worksheet question whose answer moves to
a section at the end, points figures at their PNG, and marks outside links so the print
stylesheet shows their address. `render` prints it with a fetcher that reads only files inside
`site/`, with `SOURCE_DATE_EPOCH` and the PDF dates taken from the record, so two builds give the
same bytes.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import html
import os
import posixpath
import string
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from .errors import PageError

# Bump when the way a PDF is made changes, so cached PDFs are not reused.
FORMAT = "pdf-1"
# The address the document gives the built site. WeasyPrint names each image after its URL in
# the PDF, so a real file path would make two checkouts print different bytes; `LocalFetcher`
# serves this prefix from site/ and nothing else.
SITE = "https://site.invalid/"

# What a printed page has no use for. Material's edit/view buttons, permalinks, copy buttons,
# feedback form and source-file footer; our widgets' screen-only parts; anything a page marks
# `course-no-print`.
DROP = (
    "script", "noscript", "style", "button", "input", "select", "textarea", "nav",
    ".md-content__button", ".headerlink", ".md-clipboard", ".md-source-file", ".md-feedback",
    ".course-js-only", ".course-no-print", ".course-progress", ".course-downloads",
    ".course-check__why", ".course-check__measured", ".course-check__result",
)

# Header facts that only make sense on screen (the PDF is itself one of the downloads).
SCREEN_FACTS = {"downloads", "progress"}


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
class PrintDocument:
    """A page ready to print: the lean HTML and the local files it loads."""

    html: str
    base_url: str
    """The page's own file URL; relative addresses resolve against it."""
    resources: list[Path] = field(default_factory=list)
    """Local files the document loads (figures, images), in the order met."""
    figures: list[Path] = field(default_factory=list)
    """The page's figures as PNG, in page order (the zip ships them)."""
    checks: int = 0
    """How many checks were printed with their answers at the end."""

    def key(self) -> str:
        """A hash of everything the PDF is made from: the document and the bytes it loads."""
        digest = hashlib.sha256()
        digest.update(f"{FORMAT}\0{_weasyprint_version()}\0".encode())
        digest.update(self.html.encode("utf-8"))
        for path in self.resources:
            digest.update(b"\0" + path.name.encode() + b"\0")
            digest.update(_file_digest(path))
        return digest.hexdigest()


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


def prepare(site_dir: Path, fallback: Cover, meta: PrintMeta) -> PrintDocument:
    """The printable document of one built page; PageError naming the page when it cannot be.

    The page's own header (`<header class="course-lesson-header">`) becomes the cover, so the PDF
    shows the facts exactly as the page does; `fallback` is used for a page without one.
    """
    source = page_file(site_dir, meta.page_url)
    shown = f"site/{source.relative_to(site_dir).as_posix()}" if source.is_relative_to(site_dir) else str(source)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PageError(f"{shown}: no such page (was the HTML built?)") from None
    article = article_of(text, shown)
    lean = _Lean(article, site_dir, source, meta, shown)
    lean.links()  # first, so the links of the header's facts are marked too
    cover = lean.cover(fallback)
    lean.clean()
    answers = lean.checks()
    lean.figures_and_images()
    body = "".join(_serialise(child) for child in _content(article))
    template = string.Template(_template("print.html"))
    document = template.substitute(
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
    return PrintDocument(
        html=document, base_url=SITE + meta.page_url, resources=lean.resources, figures=lean.figures,
        checks=lean.check_count,
    )


def article_of(page_html: str, shown: str) -> ET.Element:
    """The `<article class="md-content__inner">` of a page Material built."""
    import tinyhtml5  # type: ignore[import-untyped]

    # Parsing only the article (Material's navigation is most of a page) keeps a no-change
    # rebuild cheap; Material never nests one article in another.
    start = page_html.find('<article class="md-content__inner')
    end = page_html.rfind("</article>")
    if start >= 0 and end > start:
        page_html = f"<!DOCTYPE html><html><body>{page_html[start:end]}</article></body></html>"
    root = tinyhtml5.parse(page_html, namespace_html_elements=False)
    for element in root.iter("article"):
        if "md-content__inner" in element.get("class", "").split():
            found: ET.Element = element
            return found
    raise PageError(f"{shown}: no <article class=\"md-content__inner\"> (not a page Material built?)")


def cover_html(cover: Cover, meta: PrintMeta) -> str:
    """The cover block's HTML."""
    where = " · ".join(p for p in (cover.part, f"Lesson {cover.number}" if cover.number else None) if p)
    rows = "".join(f"<div><dt>{html.escape(label)}</dt><dd>{value}</dd></div>" for label, value in cover.facts)
    address = urljoin(meta.site_url, meta.page_url) if meta.site_url else ""
    parts = [
        '<header class="print-cover">',
        f'<p class="print-cover__part">{html.escape(where)}</p>' if where else "",
        f'<h1 class="print-cover__title">{html.escape(cover.title)}</h1>',
        f'<p class="print-cover__summary">{html.escape(cover.summary)}</p>' if cover.summary else "",
        f'<dl class="print-cover__facts">{rows}</dl>' if rows else "",
        (f'<p class="print-cover__note"><span class="print-course-name">{html.escape(meta.course)}</span>'
         + (f' · <span class="print-page-address">{html.escape(address)}</span>' if address else "")
         + "</p>"),
        "</header>",
    ]
    return "".join(parts)


class _Lean:
    """The article being made printable, with a map from each element to its parent."""

    def __init__(self, article: ET.Element, site_dir: Path, source: Path, meta: PrintMeta, shown: str) -> None:
        self.article = article
        self.site_dir = site_dir.resolve()
        self.source = source
        self.meta = meta
        self.shown = shown
        self.resources: list[Path] = []
        self.figures: list[Path] = []
        self.check_count = 0
        self.parents = {child: parent for parent in article.iter() for child in parent}

    def select(self, selector: str) -> list[ET.Element]:
        """Elements of the article matching a CSS selector, in document order."""
        import cssselect2  # type: ignore[import-untyped]

        wrapper = cssselect2.ElementWrapper.from_html_root(self.article)
        return [found.etree_element for found in wrapper.query_all(selector)]

    def remove(self, element: ET.Element) -> None:
        """Take an element out, keeping the text that followed it."""
        parent = self.parents.get(element)
        if parent is None:
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
            return next((e for e in self.select(selector) if _within(e, header, self.parents)), None)

        kicker, title, summary = first(".course-kicker"), first("h1"), first(".course-summary")
        facts = []
        for row in self.select("dl.course-facts > div"):
            label, value = row.find("dt"), row.find("dd")
            if label is None or value is None or not _within(row, header, self.parents):
                continue
            name = _text(label)
            if name.lower() in SCREEN_FACTS:
                continue
            inner = (html.escape(value.text) if value.text else "") + "".join(_serialise(c) for c in value)
            facts.append((name, inner))
        self.remove(header)
        return Cover(
            title=_text(title) if title is not None else fallback.title,
            part=_text(kicker) if kicker is not None else fallback.part,
            summary=_text(summary) if summary is not None else fallback.summary,
            facts=tuple(facts) or fallback.facts,
        )

    def clean(self) -> None:
        """Drop what only works on screen, and the page's own h1 (the cover holds the title)."""
        for element in self.select(", ".join(DROP)):
            self.remove(element)
        first = next((e for e in self.article.iter() if e.tag in ("h1", "h2", "h3", "p", "div")), None)
        if first is not None and first.tag == "h1":
            self.remove(first)
        for element in self.article.iter():
            element.attrib.pop("hidden", None)  # what survived DROP is meant to be read
            element.attrib.pop("loading", None)
            element.attrib.pop("tabindex", None)

    def checks(self) -> str:
        """Number the checks, strip their controls and gather their answers into an end section."""
        answers = []
        for number, check in enumerate(self.select(".course-check"), start=1):
            anchor = f"print-answer-{number}"
            legend = next(check.iter("legend"), None)
            question = _text(legend) if legend is not None else f"Check {number}"
            if legend is not None:
                tag = ET.Element("span", {"class": "print-check-number"})
                tag.text = f"Check {number}. "
                tag.tail = legend.text
                legend.text = None
                legend.insert(0, tag)
            details = [d for d in check.iter("details") if "course-check__answer" in d.get("class", "")]
            for block in details:
                self.remove(block)
            ref = ET.SubElement(check, "p", {"class": "print-answer-ref"})
            link = ET.SubElement(ref, "a", {"href": f"#{anchor}"})
            link.text = "Answer at the end"
            for label in check.iter("label"):
                label.attrib.pop("for", None)  # its radio button is gone
            answer = ET.Element("div", {"class": "print-answer", "id": anchor})
            heading = ET.SubElement(answer, "h3")
            heading.text = f"Check {number}"
            asked = ET.SubElement(answer, "p", {"class": "print-answer__question"})
            asked.text = _strip_kind(question)
            for block in details:
                for child in block:
                    if child.tag != "summary":
                        answer.append(copy.deepcopy(child))
            answers.append(_serialise(answer))
            self.check_count = number
        if not answers:
            return ""
        return (
            '<section class="print-answers"><h2 id="print-answers">Answers to the checks</h2>'
            + "".join(answers) + "</section>"
        )

    def figures_and_images(self) -> None:
        """Point each figure at its PNG, check every local image exists, drop remote ones."""
        for img in list(self.article.iter("img")):
            png = img.get("data-png")
            src = png or img.get("src") or ""
            if _is_remote(src):
                self._replace_with_alt(img)
                continue
            path = self._local(src)
            if path is None or not path.is_file():
                raise PageError(f"{self.shown}: image '{src}' is not in the built site")
            img.set("src", SITE + path.relative_to(self.site_dir).as_posix())
            img.attrib.pop("data-png", None)
            img.attrib.pop("srcset", None)
            self.resources.append(path)
            if (png or path.suffix.lower() == ".png") and path not in self.figures:
                self.figures.append(path)

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
                if _text(link).strip() != href:
                    link.set("class", (link.get("class", "") + " print-external").strip())
                continue
            if parts.scheme:
                continue
            target = _site_path(self.meta.page_url, parts.path)
            if parts.path == "" or target.rstrip("/") == self.meta.page_url.rstrip("/"):
                link.set("href", f"#{parts.fragment}" if parts.fragment else "#")
            elif self.meta.site_url:
                link.set("href", urljoin(self.meta.site_url, _site_path(self.meta.page_url, href)))
                link.set("class", (link.get("class", "") + " print-external").strip())
            else:
                del link.attrib["href"]

    def _local(self, src: str) -> Path | None:
        """A site-relative or page-relative image address as a file inside site/, else None."""
        path = unquote(urlsplit(src).path)
        if not path:
            return None
        candidates = [self.source.parent / path, self.site_dir / path.lstrip("/")]
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved.is_relative_to(self.site_dir) and resolved.is_file():
                return resolved
        return None

    def _replace_with_alt(self, img: ET.Element) -> None:
        span = ET.Element("span", {"class": "print-missing-image"})
        span.text = f"[image: {img.get('alt') or img.get('src')}]"
        span.tail = img.tail
        parent = self.parents[img]
        parent.insert(list(parent).index(img), span)
        parent.remove(img)


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
        self.fetched: list[str] = []

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
        self.fetched.append(url)
        return URLFetcherResponse(url, body=path.read_bytes())


@contextlib.contextmanager
def source_date_epoch(epoch: int) -> Iterator[None]:
    """Set SOURCE_DATE_EPOCH while printing (fontTools stamps font subsets with it)."""
    before = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = before


def render(document: PrintDocument, target: Path, site_dir: Path, epoch: int,
           cache: dict[str, Any] | None = None) -> int:
    """Print the document to `target` (through a temporary file); returns its page count."""
    import logging

    import weasyprint  # type: ignore[import-untyped]

    fetcher = LocalFetcher(site_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    # WeasyPrint logs every CSS property it does not know (Material's markup brings some) as a
    # warning; only errors matter here.
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    with source_date_epoch(epoch):
        rendered = weasyprint.HTML(
            string=document.html, base_url=document.base_url, url_fetcher=fetcher
        ).render(optimize_images=True, cache=cache if cache is not None else {})
        rendered.write_pdf(tmp)
    os.replace(tmp, target)
    return len(rendered.pages)


def _within(element: ET.Element, ancestor: ET.Element, parents: dict[ET.Element, ET.Element]) -> bool:
    node: ET.Element | None = element
    while node is not None:
        if node is ancestor:
            return True
        node = parents.get(node)
    return False


def _content(article: ET.Element) -> list[ET.Element | str]:
    items: list[ET.Element | str] = [html.escape(article.text)] if article.text else []
    items.extend(article)
    return items


def _serialise(node: ET.Element | str) -> str:
    if isinstance(node, str):
        return node
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


def _file_digest(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()
