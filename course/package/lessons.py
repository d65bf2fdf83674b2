"""After the HTML: each lesson's PDF and zip in `site/downloads/`, reused when unchanged.

    package_lessons(root, site_dir)       one call, right after mkdocs has written site/

For every lesson of the outline (`docs/course.yml`) with a page, the page PDF is printed from the
built HTML (`course.pdf`) and the zip is assembled (`course.bundle`), both named after the
lesson's number as learners expect: `lesson-2.4.pdf`, and `lesson-2.4.zip` unpacking to
`lesson-2.4/`. Both are keyed by a hash of their inputs and kept under `.cache/package/<lesson>/`
at the project root (outside site/, which mkdocs wipes): when the key matches, the kept file is
copied instead of being made again. The PDFs still to print are printed in parallel, one process
per core (WeasyPrint holds the GIL; a course of 50 lessons is printed in a fraction of the time).
"""

from __future__ import annotations

import ctypes
import gc
import html
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import yaml

from ..errors import PageError, os_message
from ..lab.load import LoadedLab, load_lab
from ..pages.choose import lesson_page_runs
from ..pages.facts import (
    checked_on,
    engine_text,
    hands_on,
    machine_text,
    prose_words,
    reading_minutes,
)
from ..pages.format import minutes_text
from ..pages.lessons import read_meta
from ..pages.outline import load_outline
from ..record.models import Run
from ..record.store import Store
from . import bundle, pdf
from .document import Cover, Page, PrintDocument, PrintMeta

DOWNLOADS = "downloads"
CACHE = Path(".cache") / "package"
PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""
GUIDE_PAGE = "before-you-start.md"
"""The learners' page on renting a GPU and getting a lab onto it, under docs/."""


@dataclass(frozen=True)
class Site:
    """What the PDFs take from mkdocs.yml."""

    name: str = "LLM inference engineering"
    author: str = ""
    url: str | None = None
    language: str = "en"


@dataclass
class Packaged:
    """What packaging one lesson did."""

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
    notes: list[str] = field(default_factory=list)
    """What the zip left out or masked (untracked files, dotfiles, secrets)."""


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


@dataclass
class _Job:
    """One lesson's packaging, between deciding what to remake and making it."""

    page: LessonRef
    stem: str
    """'lesson-2.4': the downloads' name and the zip's folder."""
    run: Run
    lab: LoadedLab
    page_html: Page
    keep: Path
    key: str
    """The hash of the PDF's inputs."""
    pdf_target: Path
    pdf_reused: bool
    markdown: str = ""  # the page's Markdown: its "Step N" headings number START-HERE.md's
    guide: str | None = None  # the address of the course's "Before you start" page
    document: PrintDocument | None = None
    """The document to print, when the kept PDF cannot be reused."""
    pdf_seconds: float = 0.0
    pdf_pages: int | None = None


def package_lessons(
    root: Path,
    site_dir: Path,
    pages: Iterable[LessonRef] | None = None,
    cache_dir: Path | None = None,
    site_url: str | None = None,
    jobs: int | None = None,
) -> list[Packaged]:
    """Write `site/downloads/lesson-<number>.pdf` and `.zip` for every lesson of a built site.

    `pages` are the lesson pages the HTML build made (each with the run it shows); without them,
    every page of docs/ that names a lesson, with its pinned or newest good run. A lesson's
    downloads are made from its outline page; a lesson the outline does not list has none.
    `site_url` overrides mkdocs.yml's address (printed in the PDF); `jobs` is the number of
    processes printing PDFs (default: one per core).
    """
    site = read_site(root / "mkdocs.yml")
    if site_url:
        site = replace(site, url=site_url if site_url.endswith("/") else site_url + "/")
    store = Store(root / "build")
    outline = load_outline(root / "docs")
    chosen = list(pages) if pages is not None else lesson_page_runs(root)
    cache = cache_dir if cache_dir is not None else root / CACHE
    todo: list[_Job] = []
    for page in chosen:
        listed = next((x for x in outline.lessons if x.src == page.src), None)
        if listed is None or any(job.page.lesson == page.lesson for job in todo):
            continue  # another page of a lesson links to the lesson's own downloads
        try:
            todo.append(_plan(root, site_dir, page, listed.download_stem, site, store, cache))
        except OSError as exc:
            raise _os_error(page, "reading its page and lab", exc) from None
    _print_all([job for job in todo if job.document is not None], site_dir, jobs)
    finished = []
    for job in todo:
        try:
            finished.append(_finish(job))
        except OSError as exc:
            raise _os_error(job.page, "writing its zip", exc) from None
    return finished


def _os_error(page: LessonRef, doing: str, exc: OSError) -> PageError:
    """An operating system's error while packaging a lesson, naming the lesson, page and path."""
    return PageError(f"lesson '{page.lesson}' (docs/{page.src}): {doing}: {os_message(exc)}")


def _plan(
    root: Path,
    site_dir: Path,
    page: LessonRef,
    stem: str,
    site: Site,
    store: Store,
    cache: Path,
) -> _Job:
    """Read the built page, and reuse its kept PDF or prepare the document to print."""
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
        lab_zip=f"{DOWNLOADS}/{stem}.zip",
    )
    page_html = pdf.read_page(site_dir, page.url)
    key = page_html.key(cover, meta)
    downloads = site_dir / DOWNLOADS
    downloads.mkdir(parents=True, exist_ok=True)
    keep = cache / lesson
    keep.mkdir(parents=True, exist_ok=True)
    target = downloads / f"{stem}.pdf"
    reused = _reuse(keep / "page.pdf", key, target)
    job = _Job(page, stem, run, lab, page_html, keep, key, target, reused)
    job.markdown = (root / "docs" / page.src).read_text(encoding="utf-8")
    if site.url and (root / "docs" / GUIDE_PAGE).is_file():
        job.guide = site.url + GUIDE_PAGE.removesuffix(".md") + "/"
    if not reused:
        _forget(keep / "page.pdf")
        job.document = pdf.prepare(page_html, cover, meta)
    return job


def _print_one(
    document: PrintDocument, target: Path, site_dir: Path, epoch: int
) -> tuple[int, float]:
    """Print one PDF (in a worker process or here): its page count and the seconds it took."""
    started = time.perf_counter()
    pages = pdf.render(document, target, site_dir, epoch, {})
    return pages, time.perf_counter() - started


def _end_with(parent: int) -> None:
    """In a worker: die with the build, however it ends (SIGKILL included). Linux's parent-death
    signal where there is one, else a thread that watches for the parent to go."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _print_all(jobs: list[_Job], site_dir: Path, workers: int | None) -> None:
    """Print the PDFs that could not be reused, in parallel when there are several and cores."""
    count = min(len(jobs), workers or os.cpu_count() or 1)
    args = [
        (job.document, job.keep / "page.pdf", site_dir, pdf.epoch_of(job.run.record.started))
        for job in jobs
    ]
    if count <= 1:
        images: dict[str, Any] = {}  # WeasyPrint's image cache, shared by the pages printed here
        for job, (document, target, folder, epoch) in zip(jobs, args, strict=True):
            started = time.perf_counter()
            assert document is not None
            try:
                job.pdf_pages = pdf.render(document, target, folder, epoch, images)
            except OSError as exc:
                raise _os_error(job.page, "printing its PDF", exc) from None
            job.pdf_seconds = time.perf_counter() - started
    else:
        # fork: the workers start with everything imported, at no cost; the objects alive now are
        # frozen out of the garbage collector first, so that the workers do not write to (and so
        # copy) every page of memory they share with this process
        context = multiprocessing.get_context("fork")
        gc.freeze()
        pool = ProcessPoolExecutor(
            max_workers=count, mp_context=context, initializer=_end_with, initargs=(os.getpid(),)
        )
        try:
            futures = [pool.submit(_print_one, *a) for a in args]  # type: ignore[arg-type]
            for job, future in zip(jobs, futures, strict=True):
                try:
                    job.pdf_pages, job.pdf_seconds = future.result()
                except OSError as exc:
                    raise _os_error(job.page, "printing its PDF", exc) from None
        except BaseException:  # Ctrl-C, or a page that failed: the other prints are not awaited
            for worker in list(getattr(pool, "_processes", {}).values()):
                worker.kill()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            gc.unfreeze()
    for job in jobs:
        _remember(job.keep / "page.pdf", job.key, job.pdf_target)


def _finish(job: _Job) -> Packaged:
    """The zip of one lesson, reused or made, once its PDF is in place."""
    notes: list[str] = []
    entries = bundle.bundle_entries(
        job.lab,
        job.run,
        job.pdf_target,
        job.page_html.figures,
        job.stem,
        notes,
        job.markdown,
        job.guide,
    )
    date = bundle.zip_date(job.run)
    zip_key = bundle.entries_key(job.stem, entries, date)
    zip_target = job.pdf_target.with_suffix(".zip")
    zip_reused = _reuse(job.keep / "lesson.zip", zip_key, zip_target)
    if not zip_reused:
        _forget(job.keep / "lesson.zip")
        bundle.write_zip(job.keep / "lesson.zip", job.stem, entries, date)
        _remember(job.keep / "lesson.zip", zip_key, zip_target)
    return Packaged(
        job.page.lesson, job.page.src, job.pdf_target, zip_target, job.pdf_reused,
        zip_reused, job.pdf_seconds, job.pdf_pages, notes,
    )  # fmt: skip


def cover_of(root: Path, src: str, run: Run, lab: LoadedLab) -> Cover:
    """A cover for a page without the lesson header: its facts from front matter and record."""
    meta, _, body = read_meta(root / "docs" / src, f"docs/{src}")
    reading = reading_minutes(prose_words(body))
    spent = hands_on(run, lab).total  # steps, builds, set-up and the typing allowance
    facts = (
        ("Time", f"about {reading} min to read; {minutes_text(spent)} hands-on"),
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
