"""The lesson zip: the lab as in the repository, the figures, the page PDF and START-HERE.md.

    lesson-2.4.zip                    named after the lesson's number in the outline
      lesson-2.4/START-HERE.md        every step in order: command, purpose, expected output, time
      lesson-2.4/lesson-2.4.pdf       the page
      lesson-2.4/figures/*.png        the page's figures
      lesson-2.4/lab/...              lab/<lesson>/ without caches, virtual environments or outputs
      lesson-2.4/expected.json        the page's values and how each moves on another GPU, and
      lesson-2.4/lab/compare.py       the check of a learner's run against them, with
      lesson-2.4/lab/compare_report.py  the table it prints (see expected.py)

The bytes depend only on the inputs: entries sorted by name, every timestamp the record's start
(or SOURCE_DATE_EPOCH when there is no record), fixed permissions, fixed compression. Names are
checked on the way in: relative, inside the top folder, no '..'; symbolic links are never
followed, so nothing outside the lab folder can get in.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import subprocess
import zipfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from ..errors import PageError
from ..lab.files import IGNORED_PARTS, IGNORED_SUFFIXES
from ..lab.load import LoadedLab
from ..record.masking import MaskError, Redactor
from ..record.models import Run
from .expected import EXPECTED, compare_files, expected_for, expected_json
from .start_here import START_HERE, start_here

# Bump when the zip's layout or START-HERE.md changes, so cached zips are not reused.
FORMAT = "zip-3"
FILE_MODE = 0o644
EXEC_MODE = 0o755
# Already-compressed files are stored as they are; deflating them again only costs time.
STORED_SUFFIXES = {".png", ".pdf", ".zip", ".gz", ".jpg", ".jpeg", ".whl", ".safetensors"}


@dataclass(frozen=True)
class Entry:
    """One file of the zip: its name under the top folder, its bytes and its permissions."""

    name: str
    data: bytes
    mode: int = FILE_MODE


def safe_name(name: str) -> str:
    """A zip entry name that stays inside its folder; PageError otherwise."""
    path = PurePosixPath(name)
    bad = (
        not name
        or name.startswith("/")
        or "\\" in name
        or ":" in path.parts[0]
        or any(part in ("", ".", "..") for part in name.split("/"))
    )
    if bad:
        raise PageError(f"zip entry {name!r} is not a relative path inside the lesson folder")
    return name


def lab_listing(
    folder: Path, outputs: set[str] | None = None, left_out: list[str] | None = None
) -> list[str]:
    """The lab's files as the repository holds them, relative and sorted.

    In a git checkout, the files git tracks there (`git add` puts a new file in); without git, the
    files on disk that the lab's own `.gitignore` does not ignore. Caches, virtual environments,
    symbolic links, the files the steps produce (`files:` in lab.yml, kept in the record instead)
    and dotfiles (`.env` and the like hold secrets; only DOTFILES get in) are left out either
    way. Each file left out for being untracked or a dotfile is named in `left_out`.
    """
    names = _git_listing(folder)
    if names is None:
        patterns = _ignore_patterns(folder / ".gitignore")
        names = [n for n in _walk(folder) if not _ignored(n, patterns)]
    else:
        tracked = set(names)
        for name in _git_listing(folder, untracked=True) or []:
            if name not in tracked and left_out is not None:
                why = (
                    DOTFILE
                    if _dotfile(name)
                    else "not tracked by git, so not in the zip (git add it)"
                )
                left_out.append(f"{name}: {why}")
    root = folder.resolve()
    kept = []
    for name in names:
        rel = PurePosixPath(name)
        if any(part in IGNORED_PARTS for part in rel.parts) or rel.suffix in IGNORED_SUFFIXES:
            continue
        if outputs and name in outputs:
            continue
        path = folder / name
        if path.is_symlink() or not path.is_file():
            continue
        if not path.resolve().is_relative_to(root):
            continue
        if _dotfile(name):
            if left_out is not None:
                left_out.append(f"{name}: {DOTFILE}")
            continue
        kept.append(safe_name(name))
    return sorted(set(kept))


DOTFILE = "a dotfile (it may hold secrets), so not in the zip"
DOTFILES = frozenset({".gitignore", ".gitattributes", ".python-version"})
"""The only dotfiles a lesson zip takes."""


def _dotfile(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return any(p.startswith(".") for p in parts[:-1]) or (
        parts[-1].startswith(".") and parts[-1] not in DOTFILES
    )


def _git_listing(folder: Path, untracked: bool = False) -> list[str] | None:
    """The files git tracks under a folder (or, `untracked`, those it neither tracks nor
    ignores); None outside a git checkout."""
    which = ["--others", "--exclude-standard"] if untracked else ["--cached"]
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-z", *which],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = [raw.decode("utf-8", "surrogateescape") for raw in done.stdout.split(b"\0") if raw]
    return names or None  # a lab folder git ignores as a whole is read from the disk instead


def _walk(folder: Path) -> list[str]:
    """Every regular file under a folder, relative, without entering linked folders."""
    out = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_PARTS and not (here / d).is_symlink())
        for name in files:
            out.append((here / name).relative_to(folder).as_posix())
    return out


def _ignore_patterns(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [
        line for line in lines if line and not line.startswith("#") and not line.startswith("!")
    ]


def _ignored(name: str, patterns: list[str]) -> bool:
    """Whether a relative path matches the simple .gitignore patterns (names, globs, dir/)."""
    parts = name.split("/")
    for pattern in patterns:
        directory = pattern.endswith("/")
        pattern = pattern.strip("/")
        if "/" in pattern:
            if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name, pattern + "/*"):
                return True
            continue
        candidates = parts[:-1] if directory else parts
        if any(fnmatch.fnmatch(part, pattern) for part in candidates):
            return True
    return False


def step_outputs(lab: LoadedLab) -> set[str]:
    """The files the lab's steps produce (they belong to the record, not the lab)."""
    return {path for step in lab.lab.steps for path in step.files}


def lab_entries(lab: LoadedLab, left_out: list[str] | None = None) -> list[Entry]:
    """The lab folder's files and the files it includes from other labs, under `lab/` (the files
    left out, named in `left_out`)."""
    entries = []
    listed = lab_listing(lab.folder, step_outputs(lab), left_out)
    files = {name: lab.folder / name for name in listed}
    for name, path in sorted({**files, **lab.included}.items()):
        executable = path.stat().st_mode & stat.S_IXUSR
        entries.append(
            Entry(f"lab/{name}", path.read_bytes(), EXEC_MODE if executable else FILE_MODE)
        )
    return entries


def figure_entries(figures: list[Path]) -> list[Entry]:
    """The page's figures under `figures/`, named as on the site (numbered when two names meet)."""
    entries: list[Entry] = []
    taken: set[str] = set()
    for path in figures:
        name, n = path.name, 1
        while name in taken:
            n += 1
            name = f"{path.stem}-{n}{path.suffix}"
        taken.add(name)
        entries.append(Entry(f"figures/{name}", path.read_bytes()))
    return entries


def bundle_entries(
    lab: LoadedLab,
    run: Run,
    pdf: Path,
    figures: list[Path],
    stem: str | None = None,
    notes: list[str] | None = None,
    page: str | None = None,
    guide: str | None = None,
) -> list[Entry]:
    """Every entry of a lesson's zip, sorted by name, secrets masked; the PDF is `<stem>.pdf`
    (default: the lesson id). What was left out or masked is said in `notes`. `page` is the
    page's Markdown (START-HERE.md numbers the steps as it does), `guide` the address of the
    course's "Before you start" page."""
    lesson = lab.lab.lesson
    name = f"{stem or lesson}.pdf"
    left_out: list[str] = []
    entries = [
        Entry(START_HERE, start_here(lab, run, name, page, guide).encode("utf-8")),
        Entry(name, pdf.read_bytes()),
        *figure_entries(figures),
        *lab_entries(lab, left_out),
    ]
    said = [f"lab/{lesson}/{x}" for x in left_out]
    entries = masked(entries, lesson, said)
    if notes is not None:
        notes += said
    # the learner's check of their own run: python3 compare.py
    entries.append(Entry(EXPECTED, expected_json(expected_for(lab, run))))
    entries += [Entry(name, data) for name, data in compare_files().items()]
    names = [safe_name(e.name) for e in entries]
    if len(set(names)) != len(names):
        raise PageError(f"lesson '{lesson}': two files would share one name in its zip")
    return sorted(entries, key=lambda e: e.name)


def masked(entries: list[Entry], lesson: str, notes: list[str]) -> list[Entry]:
    """The entries with every secret masked as in a record (the builder's secret variables and
    token shapes); each file masked is named in `notes`. PageError naming the file when a secret
    sits where masking would break it."""
    redact = Redactor.from_environment()
    out = []
    for entry in entries:
        if PurePosixPath(entry.name).suffix.lower() in STORED_SUFFIXES:
            out.append(entry)  # made here from masked records; compressed, nothing to scan
            continue
        try:
            data = redact.kept_file(entry.data, entry.name)
        except MaskError as exc:
            raise PageError(f"lesson '{lesson}': the zip would hold a secret: {exc}") from None
        if data != entry.data:
            notes.append(f"lesson '{lesson}': {entry.name}: a secret, masked in the zip's copy")
        out.append(replace(entry, data=data))
    return out


def zip_date(run: Run | None) -> tuple[int, int, int, int, int, int]:
    """The timestamp every entry carries: the record's start, else SOURCE_DATE_EPOCH, else 1980."""
    if run is not None:
        moment = datetime.fromisoformat(run.record.started)
    elif os.environ.get("SOURCE_DATE_EPOCH"):
        moment = datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), UTC)
    else:
        moment = datetime(1980, 1, 1, tzinfo=UTC)
    moment = max(moment.astimezone(UTC), datetime(1980, 1, 1, tzinfo=UTC))
    return (
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second - moment.second % 2,
    )


def entries_key(top: str, entries: list[Entry], date: tuple[int, ...]) -> str:
    """A hash of everything the zip is made from."""
    digest = hashlib.sha256(f"{FORMAT}\0{top}\0{date}\0".encode())
    for entry in entries:
        digest.update(f"{entry.name}\0{entry.mode:o}\0".encode())
        digest.update(hashlib.sha256(entry.data).digest())
    return digest.hexdigest()


def write_zip(
    target: Path, top: str, entries: list[Entry], date: tuple[int, int, int, int, int, int]
) -> None:
    """Write the zip (through a temporary file): one top folder, sorted entries, fixed metadata."""
    safe_name(top)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w") as archive:
        for entry in sorted(entries, key=lambda e: e.name):
            info = zipfile.ZipInfo(f"{top}/{safe_name(entry.name)}", date_time=date)
            info.create_system = 3  # unix, so the permissions below are read
            info.external_attr = (stat.S_IFREG | entry.mode) << 16
            stored = PurePosixPath(entry.name).suffix.lower() in STORED_SUFFIXES
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, entry.data, compresslevel=None if stored else 9)
    os.replace(tmp, target)


# START-HERE.md ------------------------------------------------------------------------------
