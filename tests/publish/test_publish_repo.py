"""The issue's "done when": on a fresh copy of the repository, `course publish --site-url URL
--to out/` makes the whole course site, checked, from the committed records.

The publication is conftest.py's `repo_published` (for a local address, which `repo_site` serves
to the browser tests of tests/lessons/): the repository is published once a run, not once for
these checks and again for those."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile

from support import REPO, Published

from course.pages.choose import newest_page_run, page_runs
from course.pages.outline import load_outline
from course.publish.links import check_links
from course.record.store import Store


def test_publish_on_a_fresh_clone_makes_a_checked_site(repo_published: Published) -> None:
    root, done, url = repo_published.root, repo_published.done, repo_published.url
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"published: {root / 'out'}"
    assert re.search(r"\d+ internal links and anchors checked, none broken", done.stderr)
    out = root / "out"
    assert check_links(out, url).broken == []
    pages = sorted(out.rglob("index.html"))
    assert len(pages) >= 7
    for page in pages:
        text = page.read_text(encoding="utf-8")
        card = re.search(r'<meta property="og:image" content="([^"]+)"', text)
        assert f'<link rel="canonical" href="{url}' in text, page
        assert card and (out / card.group(1).removeprefix(url)).is_file(), page
        assert '<meta property="og:title"' in text and '<meta name="twitter:card"' in text


def test_the_landing_page_lists_the_course_with_its_downloads(repo_published: Published) -> None:
    out = repo_published.site_dir
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


def test_the_sitemap_and_feed_follow_the_records(repo_published: Published) -> None:
    out, url = repo_published.site_dir, repo_published.url
    newest = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert newest is not None
    ns = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    urls = ET.parse(out / "sitemap.xml").getroot()
    dates = {u.findtext(f"{ns}loc"): u.findtext(f"{ns}lastmod") for u in urls}
    assert dates[url + "part-2/kv-cache/"] == newest.record.started[:10]
    atom = "{http://www.w3.org/2005/Atom}"
    titles = [
        e.findtext(f"{atom}title")
        for e in ET.parse(out / "feed.xml").getroot().iter(f"{atom}entry")
    ]
    store = Store(REPO / "build")
    written = load_outline(REPO / "docs").written
    good = [r for x in written for r in page_runs(store, x.id)]  # on each lab's card
    assert len(titles) == len(good)
    assert not any("H100" in (title or "") for title in titles)  # 2.5's H100 run moved no page
    engine = ", ".join(f"{k} {v}" for k, v in sorted(newest.record.engine.items()))
    assert f"2.4 The KV cache: re-run on {newest.record.started[:10]} with {engine}" in titles
