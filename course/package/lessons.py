"""After the HTML: each lesson page's PDF and zip in `site/downloads/`, reused when unchanged.

    package_lessons(root, site_dir)       one call, right after mkdocs has written site/

For every page whose front matter says `lesson:`, the page PDF is printed from the built HTML
(`course.pdf`) and the zip is assembled (`course.bundle`). Both are keyed by a hash of their
inputs and kept under `.cache/package/<lesson>/` at the project root (outside site/, which mkdocs
wipes): when the key matches, the kept file is copied instead of being made again.
"""

from __future__ import annotations

import html
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import yaml

from ..errors import PageError
from ..lab.load import LoadedLab, load_lab
from ..pages.choose import lesson_page_runs
from ..pages.facts import (
    checked_on,
    engine_text,
    hands_on_seconds,
    machine_text,
    prose_words,
    reading_minutes,
    typing_seconds,
)
from ..pages.format import minutes_text
from ..pages.lessons import read_meta
from ..record.models import Run
from ..record.store import Store
from . import bundle, pdf
from .document import Cover, PrintMeta

DOWNLOADS = "downloads"
CACHE = Path(".cache") / "package"


@dataclass(frozen=True)
class Site:
    """What the PDFs take from mkdocs.yml."""

    name: str = "LLM inference engineering"
    author: str = ""
    url: str | None = None
    language: str = "en"


@dataclass
class Packaged:
    """What packaging one lesson page did."""

    lesson: str
    page: str
    pdf: Path
    zip: Path
    pdf_reused: bool
    zip_reused: bool
    pdf_seconds: float
    """Seconds spent printing the PDF (0 when it was reused)."""
    pdf_pages: int | None
    """The PDF's page count when it was printed now."""


class LessonRef(Protocol):
    """A built lesson page as `course.site` names it (`LessonPage`): source, URL, lesson, run."""

    @property
    def src(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def lesson(self) -> str: ...
    @property
    def run_id(self) -> str: ...


def package_lessons(
    root: Path,
    site_dir: Path,
    pages: Iterable[LessonRef] | None = None,
    cache_dir: Path | None = None,
) -> list[Packaged]:
    """Write `site/downloads/<lesson>.pdf` and `.zip` for every lesson page of a built site.

    `pages` are the lesson pages the HTML build made (each with the run it shows); without them,
    every page of docs/ whose front matter names a lesson, with its pinned or newest good run.
    """
    site = read_site(root / "mkdocs.yml")
    store = Store(root / "build")
    chosen = list(pages) if pages is not None else lesson_page_runs(root)
    cache = cache_dir if cache_dir is not None else root / CACHE
    images: dict[str, Any] = {}  # WeasyPrint's image cache, shared by every page
    done: list[Packaged] = []
    for page in chosen:
        # A lesson's downloads are made from its first page in course order; a second page of the
        # same lesson (one pinned to an older run, say) links to the same files.
        if any(p.lesson == page.lesson for p in done):
            continue
        done.append(package_page(root, site_dir, page, site, store, cache, images))
    return done


def package_page(
    root: Path,
    site_dir: Path,
    page: LessonRef,
    site: Site,
    store: Store,
    cache: Path,
    images: dict[str, Any],
) -> Packaged:
    """The PDF and zip of one lesson page."""
    lesson = page.lesson
    run = store.get(lesson, page.run_id)
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    cover = cover_of(root, page.src, run, lab)
    meta = PrintMeta(
        author=site.author or site.name,
        course=site.name,
        date=run.record.started,
        page_url=page.url,
        site_url=site.url,
        language=site.language,
        keywords=(site.name, lab.lab.title),
        lab_zip=f"{DOWNLOADS}/{lesson}.zip",
    )
    page_html = pdf.read_page(site_dir, page.url)
    key = page_html.key(cover, meta)
    downloads = site_dir / DOWNLOADS
    downloads.mkdir(parents=True, exist_ok=True)
    keep = cache / lesson
    keep.mkdir(parents=True, exist_ok=True)

    pdf_target = downloads / f"{lesson}.pdf"
    pdf_reused = _reuse(keep / "page.pdf", key, pdf_target)
    seconds, count = 0.0, None
    if not pdf_reused:
        _forget(keep / "page.pdf")
        started = time.perf_counter()
        document = pdf.prepare(page_html, cover, meta)
        count = pdf.render(
            document, keep / "page.pdf", site_dir, pdf.epoch_of(run.record.started), images
        )
        seconds = time.perf_counter() - started
        _remember(keep / "page.pdf", key, pdf_target)

    entries = bundle.bundle_entries(lab, run, pdf_target, page_html.figures)
    date = bundle.zip_date(run)
    zip_key = bundle.entries_key(lesson, entries, date)
    zip_target = downloads / f"{lesson}.zip"
    zip_reused = _reuse(keep / "lesson.zip", zip_key, zip_target)
    if not zip_reused:
        _forget(keep / "lesson.zip")
        bundle.write_zip(keep / "lesson.zip", lesson, entries, date)
        _remember(keep / "lesson.zip", zip_key, zip_target)
    return Packaged(
        lesson, page.src, pdf_target, zip_target, pdf_reused, zip_reused, seconds, count
    )


def cover_of(root: Path, src: str, run: Run, lab: LoadedLab) -> Cover:
    """A cover for a page without the lesson header: its facts from front matter and record."""
    meta, _, body = read_meta(root / "docs" / src, f"docs/{src}")
    reading = reading_minutes(prose_words(body))
    steps, installs, downloads = hands_on_seconds(run, lab)
    downloads += typing_seconds(lab)  # the reading-and-typing allowance counts as hands-on time
    facts = (
        (
            "Time",
            f"about {reading} min to read; {minutes_text(steps + installs + downloads)} hands-on",
        ),
        ("GPU", machine_text(run, lab)),
        ("Checked on", f"{checked_on(run)}, with {engine_text(run)} (run {run.run_id})"),
    )
    return Cover(
        title=meta.title or lab.lab.title,
        part=meta.part,
        number=meta.number,
        summary=meta.summary,
        facts=tuple((label, html.escape(text)) for label, text in facts),
    )


def read_site(path: Path) -> Site:
    """site_name, site_author, site_url and theme.language from mkdocs.yml (defaults without it)."""
    if not path.is_file():
        return Site()
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_PermissiveLoader)
    except yaml.YAMLError as exc:
        raise PageError(f"{path.name}: not valid YAML: {exc}") from None
    data = data if isinstance(data, dict) else {}
    theme = data["theme"] if isinstance(data.get("theme"), dict) else {}
    url = str(data.get("site_url") or "") or None
    if url and not url.endswith("/"):
        url = f"{url}/"
    if url and (urlsplit(url).hostname or "").endswith(".invalid"):
        url = None  # a placeholder address: links to other pages stay relative
    return Site(
        name=str(data.get("site_name") or Site.name),
        author=str(data.get("site_author") or ""),
        url=str(url) if url else None,
        language=str(theme.get("language") or "en"),
    )


class _PermissiveLoader(yaml.SafeLoader):
    """A safe loader for mkdocs.yml: `!ENV` read as mkdocs does, other tags as plain values."""


def _env_tag(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """`!ENV NAME` or `!ENV [NAME, OTHER, default]`: the first variable set, else the default."""
    if isinstance(node, yaml.ScalarNode):
        return os.environ.get(loader.construct_scalar(node))
    assert isinstance(node, yaml.SequenceNode)
    items = [str(v) for v in loader.construct_sequence(node)]
    for name in items[:-1]:
        if name in os.environ:
            return os.environ[name]
    return items[-1] if items else None


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    assert isinstance(node, yaml.MappingNode)
    return loader.construct_mapping(node)


_PermissiveLoader.add_constructor("!ENV", _env_tag)
_PermissiveLoader.add_multi_constructor("", _any_tag)


def _reuse(kept: Path, key: str, target: Path) -> bool:
    """Copy the kept file to the target when it was made from the same inputs."""
    stamp = kept.with_name(kept.name + ".key")
    if kept.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == key:
        shutil.copyfile(kept, target)
        return True
    return False


def _forget(kept: Path) -> None:
    """Drop a kept file's key before remaking it, so a half-done remake is never reused."""
    kept.with_name(kept.name + ".key").unlink(missing_ok=True)


def _remember(kept: Path, key: str, target: Path) -> None:
    kept.with_name(kept.name + ".key").write_text(key + "\n", encoding="utf-8")
    shutil.copyfile(kept, target)
