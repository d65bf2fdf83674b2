"""The issue's "done when": on a fresh copy of the repository, `course publish --site-url
https://example.org/course/ --to out/` makes the whole course site, checked, from the committed
records."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from support import COURSE, REPO

from course.pages.outline import load_outline
from course.publish.links import check_links
from course.record.store import Store

URL = "https://example.org/course/"


@pytest.fixture(scope="module")
def clone(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The repository's files as a clone has them (no site, no caches), published by the CLI."""
    root = tmp_path_factory.mktemp("clone") / "course"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        name = raw.decode()
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(source.read_bytes())
    done = subprocess.run(
        [*COURSE, "publish", "--site-url", URL, "--to", "out/"],
        cwd=root,  # `python -m course` imports the copy's package, as on a fresh clone
        capture_output=True,
        text=True,
        timeout=600,
    )
    return root, done


def test_publish_on_a_fresh_clone_makes_a_checked_site(
    clone: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, done = clone
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"published: {root / 'out'}"
    assert re.search(r"\d+ internal links and anchors checked, none broken", done.stderr)
    out = root / "out"
    assert check_links(out, URL).broken == []
    pages = sorted(out.rglob("index.html"))
    assert len(pages) >= 7
    for page in pages:
        text = page.read_text(encoding="utf-8")
        card = re.search(r'<meta property="og:image" content="([^"]+)"', text)
        assert '<link rel="canonical" href="https://example.org/course/' in text, page
        assert card and (out / card.group(1).removeprefix(URL)).is_file(), page
        assert '<meta property="og:title"' in text and '<meta name="twitter:card"' in text


def test_the_landing_page_lists_the_course_with_its_downloads(
    clone: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out = clone[0] / "out"
    home = (out / "index.html").read_text(encoding="utf-8")
    outline = load_outline(REPO / "docs")
    assert outline.written  # the repository has lessons
    for lesson in outline.lessons:
        title = f"{lesson.number} {lesson.title}"
        if not lesson.written:
            assert f'<h3 class="course-lesson__title">{title}</h3>' in home  # coming: no link
            continue
        assert f'<a href="{lesson.url}">{title}</a>' in home
        stem = lesson.download_stem
        assert f'<a href="downloads/{stem}.zip" download>' in home
        with zipfile.ZipFile(out / "downloads" / f"{stem}.zip") as archive:
            names = archive.namelist()
        assert {n.split("/")[0] for n in names} == {stem}
        assert {f"{stem}/START-HERE.md", f"{stem}/{stem}.pdf"} <= set(names)
        assert any(n.startswith(f"{stem}/lab/") for n in names)
        assert (out / "downloads" / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"


def test_the_sitemap_and_feed_follow_the_records(
    clone: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out = clone[0] / "out"
    newest = Store(REPO / "build").newest_good("kv-cache")
    assert newest is not None
    ns = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    urls = ET.parse(out / "sitemap.xml").getroot()
    dates = {u.findtext(f"{ns}loc"): u.findtext(f"{ns}lastmod") for u in urls}
    assert dates[URL + "part-2/kv-cache/"] == newest.record.started[:10]
    atom = "{http://www.w3.org/2005/Atom}"
    titles = [
        e.findtext(f"{atom}title")
        for e in ET.parse(out / "feed.xml").getroot().iter(f"{atom}entry")
    ]
    store = Store(REPO / "build")
    good = [r for x in load_outline(REPO / "docs").written for r in store.runs(x.id) if r.good]
    assert len(titles) == len(good)
    engine = ", ".join(f"{k} {v}" for k, v in sorted(newest.record.engine.items()))
    assert f"2.4 The KV cache: re-run on {newest.record.started[:10]} with {engine}" in titles
