"""The precompressed copies `course publish` writes beside the site's text files: each one
decompresses to exactly its file, only text files over the threshold get them, two publications
give the same bytes, and a file in the way stops the publication."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import brotli  # type: ignore[import-untyped]
import pytest
from support import make_project

from course.errors import PublishError
from course.publish.compress import MIN_BYTES, TEXT_SUFFIXES, compress_site, summary_line
from course.publish.pipeline import Published, publish, summary

URL = "https://example.org/course/"
COPIES = (".gz", ".br")


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Published, Published]:
    """The fixture course published twice, into two folders."""
    root = make_project(tmp_path_factory.mktemp("compress") / "project")
    return publish(root, URL, to=root / "first"), publish(root, URL, to=root / "second")


def files(site: Path) -> dict[str, bytes]:
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file()
    }


def unpack(name: str, packed: bytes) -> bytes:
    return gzip.decompress(packed) if name.endswith(".gz") else bytes(brotli.decompress(packed))


def wanted(name: str, data: bytes) -> bool:
    return Path(name).suffix in TEXT_SUFFIXES and len(data) >= MIN_BYTES


def test_every_text_file_over_the_threshold_has_copies_of_exactly_its_bytes(
    twice: tuple[Published, Published],
) -> None:
    site = files(Path(twice[0].where))
    text = sorted(name for name, data in site.items() if wanted(name, data))
    for name in text:
        for suffix in COPIES:
            assert name + suffix in site, name + suffix
            assert unpack(suffix, site[name + suffix]) == site[name], name + suffix
            assert len(site[name + suffix]) < len(site[name])
    # every kind a page loads is among them, so the loop above checked something
    for name in (
        "index.html",
        "part-1/tiny/index.html",
        "404.html",
        "assets/course.css",
        "assets/course.js",
        "assets/figures/tiny-cache/tiny_cache.svg",
        "search/search_index.json",
        "sitemap.xml",
        "feed.xml",
    ):
        assert name in text, name


def test_nothing_else_gets_a_copy(twice: tuple[Published, Published]) -> None:
    site = files(Path(twice[0].where))
    copies = sorted(name for name in site if name.endswith(COPIES))
    for name in copies:
        original = name[:-3]
        assert original in site and wanted(original, site[original]), name
    assert "robots.txt" in site and "robots.txt.gz" not in site  # 72 bytes: under the threshold
    for name in site:
        if name.endswith((".png", ".pdf", ".zip", ".map")):
            assert not any(name + suffix in site for suffix in COPIES), name
    assert not [name for name in site if name.endswith((".gz.gz", ".gz.br", ".br.gz", ".br.br"))]
    assert not [name for name in site if name.endswith(".part")]


def test_a_second_publication_gives_identical_copies(
    twice: tuple[Published, Published],
) -> None:
    first, second = (files(Path(done.where)) for done in twice)
    copies = {name: data for name, data in first.items() if name.endswith(COPIES)}
    assert len(copies) > 80
    assert {name: second.get(name) for name in copies} == copies
    assert "sitemap.xml.gz" in copies  # mkdocs' own copy, stamped with the build's time, replaced


def test_the_summary_says_how_many_files_and_their_bytes(
    twice: tuple[Published, Published],
) -> None:
    done = twice[0]
    site = files(Path(done.where))
    text = [name for name, data in site.items() if wanted(name, data)]
    sizes = {suffix: sum(len(site[name + suffix]) for name in text) for suffix in COPIES}
    raw = sum(len(site[name]) for name in text)
    assert (done.compressed.files, done.compressed.raw) == (len(text), raw)
    assert (done.compressed.gzip, done.compressed.brotli) == (sizes[".gz"], sizes[".br"])
    line = (
        f"precompressed {len(text)} text files of {raw:,} B beside themselves: "
        f"gzip {sizes['.gz']:,} B ({100 * sizes['.gz'] / raw:.1f} %), "
        f"brotli {sizes['.br']:,} B ({100 * sizes['.br'] / raw:.1f} %)"
    )
    assert summary(done)[1] == line


def test_small_incompressible_and_other_files_are_left_alone(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "a").mkdir(parents=True)
    page = ("<p>words, words, words</p>\n" * 100).encode()
    (site / "a" / "index.html").write_bytes(page)
    (site / "small.css").write_bytes(b"p{margin:0}" * 50)  # 550 bytes
    (site / "noise.js").write_bytes(os.urandom(4000))  # no compressed form is smaller
    (site / "picture.png").write_bytes(page)  # compressible, but not a text type
    done = compress_site(site)
    written = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    assert written == [
        "a/index.html",
        "a/index.html.br",
        "a/index.html.gz",
        "noise.js",
        "picture.png",
        "small.css",
    ]
    assert (done.files, done.raw) == (1, len(page))
    assert gzip.decompress((site / "a" / "index.html.gz").read_bytes()) == page
    (tmp_path / "empty").mkdir()
    assert summary_line(compress_site(tmp_path / "empty")) == (
        "no text file large enough to precompress"
    )


def test_a_copy_in_the_way_stops_the_publication(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    page = ("<p>words, words, words</p>\n" * 100).encode()
    (site / "index.html").write_bytes(page)
    (site / "index.html.gz").write_bytes(gzip.compress(page, mtime=12345))  # a copy: replaced
    (site / "other.html").write_bytes(page)
    (site / "other.html.br").write_bytes(b"not brotli")
    (site / "old.xml").write_bytes(page)
    (site / "old.xml.gz").write_bytes(gzip.compress(b"an older sitemap"))
    with pytest.raises(PublishError) as caught:
        compress_site(site)
    assert str(caught.value) == (
        "cannot write the precompressed copies; nothing was published:\n"
        "  - old.xml.gz is in the site but is not a .gz copy of its sibling\n"
        "  - other.html.br is in the site but is not a .br copy of its sibling\n"
        "(remove those files from docs/, or give them other names)"
    )
    assert not (site / "index.html.br").exists()  # nothing written before the check
    (site / "other.html.br").unlink()
    (site / "old.xml.gz").unlink()
    compress_site(site)
    assert (site / "index.html.gz").read_bytes() == gzip.compress(page, 9, mtime=0)
