"""The article made lean for print: screen-only parts dropped, checks as a worksheet, figures as
PNG, listings as plain text, outside links marked so the print stylesheet shows their address."""

from __future__ import annotations

import copy
import html
import posixpath
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from .document import Cover, Page, PrintMeta

SITE = "https://site.invalid/"
ANSWERS_ID = "print-answers"
ANSWERS_TITLE = "Answers to the checks"
"""The heading of the checks' answers, gathered at the end of the PDF (and in its contents)."""
# What a printed page has no use for: Material's edit button, permalinks, copy buttons, feedback
# form and source-file footer; our widgets' screen-only parts; anything marked course-no-print.
DROP = (
    "script",
    "noscript",
    "style",
    "button",
    "input",
    "select",
    "textarea",
    "nav",
    ".md-content__button",
    ".headerlink",
    ".md-clipboard",
    ".md-source-file",
    ".md-feedback",
    ".course-js-only",
    ".course-no-print",
    ".course-progress",
    ".course-downloads",
    ".course-check__why",
    ".course-check__measured",
    ".course-check__result",
)
# Header facts that only make sense on screen (the PDF is itself one of the downloads).
SCREEN_FACTS = {"downloads", "progress"}
# A code block of at most this many lines is kept on one page (an A4 page holds about 70).
KEEP_LINES = 60


class Lean:
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
                inner = (html.escape(value.text) if value.text else "") + "".join(
                    serialise(c) for c in value
                )
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
        for element in self.select("a"):  # Zensical's target of the skip link, empty
            if element.get("id") == "__skip" and not element.text and not len(element):
                self.remove(element)
        first = next(
            (e for e in self.article.iter() if e.tag in ("h1", "h2", "h3", "p", "div")), None
        )
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
            ET.SubElement(answer, "p", {"class": "print-answer__question"}).text = _strip_kind(
                question
            )
            for block in details:
                answer.extend(copy.deepcopy(child) for child in block if child.tag != "summary")
            answers.append(serialise(answer))
            self.check_count = number
        if not answers:
            return ""
        return (
            f'<section class="print-answers"><h2 id="{ANSWERS_ID}">{ANSWERS_TITLE}</h2>'
            + "".join(answers)
            + "</section>"
        )

    def images(self) -> None:
        """Point each image at its file under the site address (figures at their PNG); a remote
        image becomes its alt text, since printing fetches nothing from the network."""
        for img in list(self.article.iter("img")):
            src = img.get("data-png") or img.get("src") or ""
            if is_remote(src):
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
            if block is not None and {"highlight", "course-terminal"} & set(
                block.get("class", "").split()
            ):
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
    suffix = (f"?{parts.query}" if parts.query else "") + (
        f"#{parts.fragment}" if parts.fragment else ""
    )
    return path + suffix


def serialise(node: ET.Element) -> str:
    return ET.tostring(node, encoding="unicode", method="html")


def _text(element: ET.Element) -> str:
    return " ".join("".join(element.itertext()).split())


def _strip_kind(question: str) -> str:
    """A check's question without its leading kind label ('Predict, then measure.')."""
    for label in ("Check your understanding.", "Predict, then measure."):
        if question.startswith(label):
            return question[len(label) :].strip()
    return question


def attr(value: str) -> str:
    return html.escape(value, quote=True)


def is_remote(src: str) -> bool:
    return urlsplit(src).scheme in ("http", "https", "ftp") or src.startswith("//")


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
