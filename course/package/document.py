"""The printable document's parts: the cover, the print facts, a built page read back, the
result.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..record.files import sha256_file

# Bump when the way a PDF is made changes, so cached PDFs are not reused.
FORMAT = "pdf-3"


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
    lab_zip: str = ""
    """The lesson zip's path under the site root (`downloads/kv-cache.zip`), named on the cover."""


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
        for part in (
            FORMAT,
            weasyprint_version(),
            repr(fallback),
            repr(meta),
            template("print.html"),
            template("print.css"),
            self.article,
        ):
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


def weasyprint_version() -> str:
    from importlib.metadata import version

    return version("weasyprint")


def template(name: str) -> str:
    return resources.files("course.package").joinpath("templates", name).read_text(encoding="utf-8")
