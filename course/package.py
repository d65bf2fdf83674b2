"""After the HTML: each lesson page's PDF and zip in `site/downloads/`, reused when unchanged.

    package_lessons(root, site_dir)       one call, right after mkdocs has written site/

For every page whose front matter says `lesson:`, the page PDF is printed from the built HTML
(`course.pdf`) and the zip is assembled (`course.bundle`). Both are keyed by a hash of their
inputs and kept under `.cache/package/<lesson>/` at the project root (outside site/, which mkdocs
wipes): when the key matches, the kept file is copied instead of being made again.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import bundle, pdf
from .errors import PageError
from .facts import checked_on, engine_text, gpu_name, hands_on_seconds, minutes_text, prose_words, reading_minutes
from .lab import LoadedLab, load_lab
from .lessons import PageEntry, lesson_pages, read_meta
from .records import Run, Store

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


def package_lessons(root: Path, site_dir: Path, pages: Iterable[PageEntry] | None = None,
                    cache_dir: Path | None = None) -> list[Packaged]:
    """Write `site/downloads/<lesson>.pdf` and `.zip` for every lesson page of a built site."""
    chosen = list(pages) if pages is not None else lesson_pages(root / "docs")
    site = read_site(root / "mkdocs.yml")
    store = Store(root / "build")
    cache = cache_dir if cache_dir is not None else root / CACHE
    images: dict[str, Any] = {}  # WeasyPrint's image cache, shared by every page
    done = []
    for page in chosen:
        if page.meta.lesson:
            done.append(package_page(root, site_dir, page, site, store, cache, images))
    return done


def package_page(root: Path, site_dir: Path, page: PageEntry, site: Site, store: Store, cache: Path,
                 images: dict[str, Any]) -> Packaged:
    """The PDF and zip of one lesson page."""
    lesson = page.meta.lesson
    assert lesson is not None
    run = _run_of(store, page)
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    cover = cover_of(root, page, run, lab)
    meta = pdf.PrintMeta(
        author=site.author or site.name, course=site.name, date=run.record.started,
        page_url=page.url, site_url=site.url, language=site.language,
        keywords=(site.name, lab.lab.title),
    )
    document = pdf.prepare(site_dir, cover, meta)
    downloads = site_dir / DOWNLOADS
    downloads.mkdir(parents=True, exist_ok=True)
    keep = cache / lesson
    keep.mkdir(parents=True, exist_ok=True)

    pdf_target = downloads / f"{lesson}.pdf"
    pdf_reused = _reuse(keep / "page.pdf", document.key(), pdf_target)
    seconds, count = 0.0, None
    if not pdf_reused:
        _forget(keep / "page.pdf")
        started = time.perf_counter()
        count = pdf.render(document, keep / "page.pdf", site_dir, pdf.epoch_of(run.record.started), images)
        seconds = time.perf_counter() - started
        _remember(keep / "page.pdf", document.key(), pdf_target)

    entries = bundle.bundle_entries(lab, run, pdf_target, document.figures)
    date = bundle.zip_date(run)
    zip_key = bundle.entries_key(lesson, entries, date)
    zip_target = downloads / f"{lesson}.zip"
    zip_reused = _reuse(keep / "lesson.zip", zip_key, zip_target)
    if not zip_reused:
        _forget(keep / "lesson.zip")
        bundle.write_zip(keep / "lesson.zip", lesson, entries, date)
        _remember(keep / "lesson.zip", zip_key, zip_target)
    return Packaged(lesson, page.src, pdf_target, zip_target, pdf_reused, zip_reused, seconds, count)


def cover_of(root: Path, page: PageEntry, run: Run, lab: LoadedLab) -> pdf.Cover:
    """The PDF's cover: the page's header facts, computed from its front matter and record."""
    _, _, body = read_meta(root / "docs" / page.src, f"docs/{page.src}")
    reading = reading_minutes(prose_words(body))
    steps, installs, downloads = hands_on_seconds(run, lab)
    gpu = gpu_name(run)
    facts = (
        ("Time", f"about {reading} min to read; {minutes_text(steps + installs + downloads)} hands-on"),
        ("GPU", gpu or "none needed: the numbers come from a machine without a GPU"),
        ("Checked on", f"{checked_on(run)} (run {run.run_id})"),
        ("Versions", engine_text(run)),
    )
    return pdf.Cover(
        title=page.meta.title or lab.lab.title, part=page.meta.part, number=page.meta.number,
        summary=page.meta.summary, facts=facts,
    )


def read_site(path: Path) -> Site:
    """site_name, site_author, site_url and theme.language from mkdocs.yml (defaults without it)."""
    if not path.is_file():
        return Site()
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_PermissiveLoader)  # noqa: S506
    except yaml.YAMLError as exc:
        raise PageError(f"{path.name}: not valid YAML: {exc}") from None
    data = data if isinstance(data, dict) else {}
    theme = data.get("theme") if isinstance(data.get("theme"), dict) else {}
    url = data.get("site_url") or None
    if url and not str(url).endswith("/"):
        url = f"{url}/"
    return Site(
        name=str(data.get("site_name") or Site.name), author=str(data.get("site_author") or ""),
        url=str(url) if url else None, language=str(theme.get("language") or "en"),
    )


class _PermissiveLoader(yaml.SafeLoader):
    """A safe loader that reads mkdocs.yml's `!!python/name:` and `!ENV` tags as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_PermissiveLoader.add_multi_constructor("", _any_tag)


def _run_of(store: Store, page: PageEntry) -> Run:
    lesson = page.meta.lesson
    assert lesson is not None
    if page.meta.run:
        return store.get(lesson, page.meta.run)
    run = store.newest_good(lesson)
    if run is None:
        raise PageError(f"docs/{page.src}: lesson '{lesson}' has no complete run in build/{lesson}/ "
                        f"(run `course run {lesson}` on a GPU machine first)")
    return run


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


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file (for benchmarks and tests comparing builds)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
