"""`course publish` on the fixture course: the address refused or used, every page's meta and card,
the sitemap, the feed, robots.txt, the link check, the 404 page in Chromium, and the deploys (a
folder; a branch of a local bare repository)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import CHROMIUM, COURSE, OLDER, RUN, STEM, free_port, make_project, serving

from course.errors import PublishError
from course.publish.deploy import deploy_to_folder
from course.publish.links import check_links
from course.publish.pipeline import Published, publish

URL = "https://example.org/course/"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    root = make_project(tmp_path_factory.mktemp("publish") / "project")
    return publish(root, URL, to=root / "out")


@pytest.fixture(scope="module")
def out(published: Published) -> Path:
    return Path(published.where)


class _Head(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, str] = {}
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "meta" and ("property" in a or "name" in a):
            self.meta[a.get("property") or a["name"]] = a.get("content", "")
        if tag == "link" and a.get("rel") in ("canonical", "alternate"):
            self.links[a["rel"]] = a["href"]


def head(path: Path) -> _Head:
    parser = _Head()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def pages(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("index.html"))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_placeholder_address_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    os.environ.pop("COURSE_SITE_URL", None)
    with pytest.raises(PublishError) as caught:
        publish(root, to=tmp_path / "out")
    assert str(caught.value) == (
        "the site's address is the placeholder https://course.invalid/ (site_url in mkdocs.yml); "
        "canonical links, the sitemap, the feed and the social cards would all name it: give the "
        "address the site will be served at with --site-url https://…/ (or set COURSE_SITE_URL)"
    )
    with pytest.raises(PublishError, match="'ftp://example.org/' .* is not an http"):
        publish(root, "ftp://example.org/", to=tmp_path / "out")
    with pytest.raises(PublishError, match="say where to publish"):
        publish(root, URL)
    assert not (tmp_path / "out").exists() and not (root / ".cache" / "publish").exists()


def test_every_page_has_canonical_description_opengraph_and_a_card(out: Path) -> None:
    found = pages(out)
    assert len(found) >= 8  # home, the lesson, the pinned page, the authors' pages
    for page in found:
        url = URL if page.parent == out else f"{URL}{page.parent.relative_to(out).as_posix()}/"
        parsed = head(page)
        assert parsed.links["canonical"] == url, page
        assert parsed.meta["og:url"] == url
        assert parsed.meta["description"] and parsed.meta["og:description"]
        assert parsed.meta["og:title"] and parsed.meta["twitter:card"] == "summary_large_image"
        image = parsed.meta["og:image"]
        assert image.startswith(URL + "assets/cards/") and parsed.meta["twitter:image"] == image
        assert png_size(out / image.removeprefix(URL)) == (1200, 630)
        assert parsed.links["alternate"] == URL + "feed.xml"
    lesson = head(out / "part-1/tiny/index.html")
    assert lesson.meta["og:type"] == "article"
    assert lesson.meta["og:image:alt"] == (
        "Part 1 · Fixtures · Lesson 1.1: A tiny cache. 112 KiB per token"
    )
    assert lesson.meta["description"].startswith("A fixture lesson that uses every macro")


def test_the_sitemap_lists_every_page_with_the_lessons_run_dates(out: Path) -> None:
    root = ET.parse(out / "sitemap.xml").getroot()
    assert root.tag == f"{SITEMAP}urlset"
    dates = {u.findtext(f"{SITEMAP}loc"): u.findtext(f"{SITEMAP}lastmod") for u in root}
    expected = {URL} | {
        URL + p.parent.relative_to(out).as_posix() + "/" for p in pages(out) if p.parent != out
    }
    assert set(dates) == expected
    assert dates[URL + "part-1/tiny/"] == RUN[:10]  # the run the page shows
    assert dates[URL + "part-1/pinned/"] == OLDER[:10]
    for day in dates.values():
        datetime.strptime(day or "", "%Y-%m-%d")
    assert (
        out / "robots.txt"
    ).read_text() == f"User-agent: *\nAllow: /\n\nSitemap: {URL}sitemap.xml\n"


def test_the_feed_lists_each_run_of_each_lesson(out: Path) -> None:
    root = ET.parse(out / "feed.xml").getroot()
    assert root.tag == f"{ATOM}feed"
    for tag in ("id", "title", "updated", "author/" + ATOM + "name"):
        assert root.findtext(ATOM + tag), tag
    entries = root.findall(f"{ATOM}entry")
    assert [e.findtext(f"{ATOM}title") for e in entries] == [
        "1.1 A tiny cache: re-run on 2026-11-20 with numpy 2.3.4",
        "1.1 A tiny cache: recorded on 2026-11-19 with numpy 2.3.4",
    ]  # the failed run of 2026-11-21 is not news
    for entry in entries:
        assert entry.find(f"{ATOM}link").get("href") == URL + "part-1/tiny/"  # type: ignore[union-attr]
        datetime.strptime(entry.findtext(f"{ATOM}updated") or "", "%Y-%m-%dT%H:%M:%SZ")
    assert len({e.findtext(f"{ATOM}id") for e in entries}) == 2


def test_no_internal_link_is_broken_and_external_ones_are_listed(
    published: Published, out: Path
) -> None:
    assert published.links.broken == []
    folded = sorted(out.rglob("code/*.html"))  # folded code blocks, fetched when unfolded
    assert [p.relative_to(out).as_posix() for p in folded] == ["part-1/tiny/code/at_length.py.html"]
    assert published.links.pages == len(pages(out)) + 1 + len(folded)  # and 404.html
    assert published.links.internal > 300
    assert "https://squidfunk.github.io/mkdocs-material/" in published.links.external
    again = check_links(out, URL)  # the deployed copy reads the same
    assert again.broken == [] and again.internal == published.links.internal


def test_the_lesson_downloads_are_named_by_number(out: Path) -> None:
    with zipfile.ZipFile(out / "downloads" / f"{STEM}.zip") as archive:
        names = archive.namelist()
    assert {n.split("/")[0] for n in names} == {STEM}
    assert f"{STEM}/{STEM}.pdf" in names and f"{STEM}/START-HERE.md" in names
    assert (out / "downloads" / f"{STEM}.pdf").read_bytes()[:5] == b"%PDF-"


def test_the_link_check_finds_missing_pages_and_anchors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "a").mkdir(parents=True)
    (site / "index.html").write_text(
        '<a href="a/">ok</a><a href="a/#here">ok</a><a href="a/#gone">anchor</a>'
        '<a href="b/">page</a><img src="/course/x.png"><a href="https://example.org/course/a/">ok</a>'
        '<a href="https://elsewhere.net/">out</a><a href="mailto:x@y">mail</a><h1 id="top"></h1>'
        '<a href="#top">self</a>',
        encoding="utf-8",
    )
    (site / "a" / "index.html").write_text('<p id="here">x</p><a href="../">up</a>')
    report = check_links(site, URL)
    assert report.broken == [
        "index.html: a/#gone: no element with id 'gone' in a/index.html",
        "index.html: b/: no such file in the site",
        "index.html: /course/x.png: no such file in the site",
    ]
    assert report.external == {"https://elsewhere.net/": 1} and report.internal == 8


def test_a_broken_link_stops_the_publication(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs" / "part-1" / "tiny.md"
    page.write_text(page.read_text() + '\n<a href="../nowhere/">gone</a>\n', encoding="utf-8")
    target = tmp_path / "out"
    with pytest.raises(PublishError) as caught:
        publish(root, URL, to=target)
    assert str(caught.value) == (
        "1 broken internal link(s) in the built site; nothing was published:\n"
        "  - part-1/tiny/index.html: ../nowhere/: no such file in the site"
    )
    assert not target.exists()


def test_a_folder_holding_something_else_is_not_replaced(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("new")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(PublishError, match="holds files but no published site"):
        deploy_to_folder(site, other, tmp_path / "project")
    with pytest.raises(PublishError, match="that is the project or a git checkout"):
        deploy_to_folder(site, tmp_path, tmp_path / "project")
    assert (other / "notes.txt").read_text() == "mine"
    old = tmp_path / "old"
    old.mkdir()
    (old / "index.html").write_text("old")
    (old / "stale.html").write_text("old")
    deploy_to_folder(site, old, tmp_path / "project")
    assert sorted(p.name for p in old.iterdir()) == ["index.html"]


def git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.org",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.org",
    }
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_publishing_to_a_branch_holds_exactly_the_site(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "the course", cwd=root)
    git("remote", "add", "origin", str(remote), cwd=root)
    env = {**os.environ, "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.org"}
    command = [*COURSE, "--root", str(root), "publish", "--site-url", URL, "--branch", "gh-pages"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert re.search(r"published: branch gh-pages of origin at [0-9a-f]{12}", first.stdout)
    assert "none broken" in first.stderr
    site = root / ".cache" / "publish" / "site"
    files = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    tree = git("ls-tree", "-r", "--name-only", "gh-pages", cwd=remote).split()
    assert tree == sorted([*files, ".nojekyll"])
    blob = git("show", "gh-pages:part-1/tiny/index.html", cwd=remote)
    assert blob == (site / "part-1" / "tiny" / "index.html").read_text(encoding="utf-8")
    second = subprocess.run([*command, "-m", "Again"], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    log = git("log", "--format=%s", "gh-pages", cwd=remote).splitlines()
    assert log == ["Again", f"Publish the course at {URL}"]  # on top of the first, not instead
    assert git("branch", "--list", cwd=remote).split() == ["gh-pages"]  # main was never pushed
    nobody = subprocess.run(
        [*command[:-1], "pages", "--remote", "upstream"], capture_output=True, text=True, env=env
    )
    assert nobody.returncode == 1
    assert "no git remote 'upstream'" in nobody.stderr


@pytest.fixture(scope="module")
def served(out: Path) -> Iterator[str]:
    """The published folder served at /course/, answering 404.html for what it lacks (as GitHub
    Pages and most static hosts do)."""
    holder = out.parent / "host"
    shutil.rmtree(holder, ignore_errors=True)
    holder.mkdir()
    (holder / "course").symlink_to(out)
    with serving(holder, free_port(), not_found="course/404.html") as url:
        yield url


def test_the_404_page_works_at_any_depth(served: str) -> None:
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page()
        failed: list[str] = []
        # (a request cut short by the next navigation is not a failure of the page)
        tab.on(
            "requestfailed",
            lambda r: None if "ERR_ABORTED" in (r.failure or "") else failed.append(r.url),
        )
        tab.on(
            "response",
            lambda r: (
                failed.append(r.url)
                if r.status >= 400 and r.request.resource_type != "document"
                else None
            ),
        )
        for depth in ("course/nope", "course/a/b/c/d/", "course/part-1/tiny/gone.html"):
            response = tab.goto(served + depth)
            assert response is not None and response.status == 404
            assert tab.locator("h1").inner_text() == "404 - Not found"
            color = tab.evaluate("getComputedStyle(document.querySelector('.md-header')).position")
            assert color == "sticky"  # Material's stylesheet was loaded from the right place
        tab.locator(".md-header__button.md-logo").click()
        tab.wait_for_url(served + "course/")
        assert tab.locator(".course-lesson__title a").first.inner_text() == "1.1 A tiny cache"
        browser.close()
    # (the site was built for example.org: Material asks that host for its sitemap, which only
    # fails here, offline; every request to where the site is served succeeded)
    assert [url for url in failed if url.startswith(served)] == []
