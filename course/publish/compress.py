"""Precompressed copies beside the site's text files, for servers that send files as they are.

    compress_site(site)     NAME.gz (gzip level 9) and NAME.br (Brotli quality 11) beside each
                            text file of at least MIN_BYTES, where the compressed form is smaller

A host that does not compress on the fly but serves a precompressed sibling when the browser
accepts its encoding (nginx `gzip_static` and `brotli_static`, Caddy's `precompressed`, many
static hosts) then sends the small copy; one that compresses itself ignores them.

Text means the types a page loads or a crawler reads: HTML, CSS, JavaScript, JSON (the search
index), XML (the sitemap, the feed), SVG (the figures), plain text (robots.txt). Source maps
(`.map`, over a megabyte of Material's) are left out: only a browser's developer tools fetch
them, and compressing them at Brotli's slowest setting would take a fifth of the time. Files
under MIN_BYTES gain less than a response header weighs.

The bytes are the same for the same input: gzip's header carries no time and no name, so two
publications of one site give identical `.gz` files (and Brotli has no header to vary). mkdocs'
own `sitemap.xml.gz`, written with the build's time, is replaced by the same kind of copy of the
sitemap as published; any other `.gz` or `.br` already in the site that is not a copy of its
sibling stops the publication rather than being overwritten.
"""

from __future__ import annotations

import gzip
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import PublishError

TEXT_SUFFIXES = frozenset({".html", ".css", ".js", ".json", ".xml", ".svg", ".txt"})
"""The files that get precompressed copies, by suffix."""
MIN_BYTES = 1024
"""Smaller files are sent as they are."""
GZIP_LEVEL = 9
BROTLI_QUALITY = 11


@dataclass(frozen=True)
class Compressed:
    """What `compress_site` wrote: how many files, their bytes, and their copies' bytes."""

    files: int
    """Text files that got at least one copy."""
    raw: int
    """Their bytes."""
    gzip: int
    """The bytes of their `.gz` copies (the file's own size where it got none)."""
    brotli: int
    """The bytes of their `.br` copies (the file's own size where it got none)."""


def text_files(site: Path) -> list[Path]:
    """The site's text files of at least MIN_BYTES, in a fixed order."""
    return sorted(
        path
        for path in site.rglob("*")
        if path.suffix in TEXT_SUFFIXES and path.is_file() and path.stat().st_size >= MIN_BYTES
    )


def _brotli() -> ModuleType:
    """Google's `brotli` module; PublishError saying how to install it when it is missing."""
    try:
        import brotli  # type: ignore[import-untyped]
    except ImportError:
        raise PublishError(
            "the Brotli copies need Google's `brotli` package: pip install 'brotli>=1.1' (or "
            "pip install -e '.[site]')"
        ) from None
    module: ModuleType = brotli
    return module


def _gzip(data: bytes) -> bytes:
    """gzip with no time in its header, so the same input gives the same bytes."""
    return gzip.compress(data, GZIP_LEVEL, mtime=0)


def _unpack(suffix: str, packed: bytes, codec: ModuleType) -> bytes | None:
    """An existing copy's content, or None when it is not a copy in that encoding."""
    try:
        return gzip.decompress(packed) if suffix == ".gz" else bytes(codec.decompress(packed))
    except (OSError, EOFError, zlib.error, codec.error):
        return None


def _in_the_way(path: Path, data: bytes, site: Path, codec: ModuleType) -> list[str]:
    """The existing `.gz`/`.br` siblings of a file that are not copies of it."""
    problems = []
    for suffix in (".gz", ".br"):
        copy = path.with_name(path.name + suffix)
        if copy.exists() and (
            not copy.is_file() or _unpack(suffix, copy.read_bytes(), codec) != data
        ):
            where = copy.relative_to(site).as_posix()
            problems.append(f"{where} is in the site but is not a {suffix} copy of its sibling")
    return problems


def _write(path: Path, data: bytes) -> None:
    """Write beside the file: a temporary name, then renamed over any older copy."""
    part = path.with_name(f".{path.name}.part")
    part.write_bytes(data)
    os.replace(part, path)


def compress_site(site: Path, jobs: int | None = None) -> Compressed:
    """Write NAME.gz and NAME.br beside each text file of the site (see the module's docstring);
    `jobs` threads compress (default: one per core; Brotli lets go of the GIL)."""
    codec = _brotli()
    files = text_files(site)
    contents = {path: path.read_bytes() for path in files}
    problems = [line for path in files for line in _in_the_way(path, contents[path], site, codec)]
    if problems:
        shown = "\n".join(f"  - {line}" for line in problems)
        raise PublishError(
            f"cannot write the precompressed copies; nothing was published:\n{shown}\n"
            "(remove those files from docs/, or give them other names)"
        )

    def both(path: Path) -> tuple[bytes, bytes]:
        data = contents[path]
        return _gzip(data), bytes(codec.compress(data, quality=BROTLI_QUALITY))

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        packed = dict(zip(files, pool.map(both, files), strict=True))
    count = raw = gz_bytes = br_bytes = 0
    try:
        for path in files:
            data = contents[path]
            wrote = False
            sizes = []
            for suffix, copy in zip((".gz", ".br"), packed[path], strict=True):
                if len(copy) < len(data):
                    _write(path.with_name(path.name + suffix), copy)
                    wrote = True
                sizes.append(min(len(copy), len(data)))
            if wrote:
                count += 1
                raw += len(data)
                gz_bytes += sizes[0]
                br_bytes += sizes[1]
    except OSError as exc:
        raise PublishError(f"cannot write the precompressed copies in {site}: {exc}") from None
    return Compressed(count, raw, gz_bytes, br_bytes)


def summary_line(done: Compressed) -> str:
    """What `course publish` says about the copies: how many files, their bytes, the copies'."""
    if done.files == 0:
        return "no text file large enough to precompress"

    def share(part: int) -> str:
        return f"{part:,} B ({100 * part / done.raw:.1f} %)"

    return (
        f"precompressed {done.files} text files of {done.raw:,} B beside themselves: "
        f"gzip {share(done.gzip)}, brotli {share(done.brotli)}"
    )
