"""`course build --engine zensical` on the fixture course, beside the MkDocs build of the same
course for the same address: every lesson page shows what MkDocs shows (values, claims, checks,
the whole article), the navigation, the meta, the sitemap, the feed, the cards, the search index,
the PDFs and zips are the same, and a failing claim fails the build with MkDocs' message.

The builds need Zensical (pip install zensical==0.0.73); where it is not installed they are
skipped, saying so, and a test checks what the build says instead.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from support import NO_ZENSICAL, REPO, RUN, ZENSICAL, make_project

from course.errors import PageError
from course.pages.choose import lesson_page_runs
from course.pages.state import report
from course.pages.zensical_adapter import from_source
from course.site import build_site, check_site
from course.site.zensical_engine import ADAPTER, zensical_config

URL = "https://example.org/course/"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
needs_zensical = pytest.mark.skipif(not ZENSICAL, reason=NO_ZENSICAL)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("engines") / "project")


@pytest.fixture(scope="module")
def sites(project: Path) -> dict[str, Path]:
    """The fixture course built for URL by each engine, each with a cache of its own."""
    return {
        engine: build_site(
            project, project.parent / engine, project.parent / f"cache-{engine}", URL, 2, engine
        ).site_dir
        for engine in ("mkdocs", "zensical")
    }


def pages(site: Path) -> list[str]:
    """The site's pages, as paths of their index.html."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))


_ARTICLE = re.compile(r'<article class="md-content__inner[^"]*">(.*)</article>', re.DOTALL)
_DEFERRED = re.compile(r'(<div class="course-deferred" data-src="([^"]+)"><p><a href=")[^"]*"')


def article(html: str) -> list[str]:
    """A page's article, its lines without the blank ones and Zensical's skip anchor, and each
    deferred block's link as the page's own (`code/x.html`, which Zensical spells `../x/code/…`,
    the same address)."""
    found = _ARTICLE.search(html)
    assert found is not None
    text = _DEFERRED.sub(r'\1\2"', found.group(1))
    return [line for line in text.splitlines() if line.strip() and 'id="__skip"' not in line]


class _Head(HTMLParser):
    """A page's meta and links: head meta by name, rel=canonical/prev/next and the feed by rel,
    the navigation's and the footer's page links in order."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.meta: dict[str, str] = {}
        self.nav: list[str] = []
        self.footer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        href = urljoin(self.url, a.get("href", "")).replace("/./", "/")
        classes = a.get("class", "")
        if tag == "meta" and ("property" in a or "name" in a):
            self.meta[a.get("property") or a["name"]] = a.get("content", "")
        elif tag == "link" and a.get("rel") in ("canonical", "alternate", "prev", "next"):
            self.meta[f"link {a['rel']}"] = href
        elif tag == "script" and a.get("type") == "application/ld+json":
            self.meta["json-ld"] = "yes"
        elif tag == "a" and "md-nav__link" in classes and "#" not in a.get("href", "#"):
            self.nav.append(href)
        elif tag == "a" and "md-footer__link" in classes:
            self.footer.append(href)


def head(site: Path, page: str) -> _Head:
    parser = _Head(URL + page.removesuffix("index.html"))
    parser.feed((site / page).read_text(encoding="utf-8"))
    parser.meta.pop("generator")  # mkdocs-1.6.1, mkdocs-material-…; zensical-0.0.73
    return parser


@needs_zensical
def test_every_lesson_page_shows_every_value_claim_and_check(
    project: Path, sites: dict[str, Path]
) -> None:
    lessons = lesson_page_runs(project)
    assert [page.url for page in lessons] == ["part-1/tiny/", "part-1/pinned/"]
    for lesson in lessons:
        shown = {
            engine: [
                len(re.findall(mark, (site / lesson.url / "index.html").read_text()))
                for mark in ('class="course-value', 'class="course-claim"', 'class="course-check"')
            ]
            + [(site / lesson.url / "index.html").read_text().count("course-error")]
            for engine, site in sites.items()
        }
        assert shown["zensical"] == shown["mkdocs"], lesson.url
        assert shown["zensical"][0] > 0 and shown["zensical"][3] == 0
    tiny = (sites["zensical"] / "part-1/tiny/index.html").read_text()
    assert "0 of 2 checks answered right" in tiny and "112 KiB" in tiny


@needs_zensical
def test_every_page_is_the_mkdocs_page_in_zensical_s_frame(sites: dict[str, Path]) -> None:
    assert pages(sites["zensical"]) == pages(sites["mkdocs"])
    for page in pages(sites["mkdocs"]):
        html = {engine: (site / page).read_text(encoding="utf-8") for engine, site in sites.items()}
        assert article(html["zensical"]) == article(html["mkdocs"]), page
        mkdocs, zensical = head(sites["mkdocs"], page), head(sites["zensical"], page)
        assert zensical.meta == mkdocs.meta, page  # description, OpenGraph, prev/next, JSON-LD
        assert zensical.nav == mkdocs.nav, page  # the outline's order, both sides
        assert zensical.footer == mkdocs.footer, page  # never across the sides
    tiny = head(sites["zensical"], "part-1/tiny/index.html")
    assert tiny.meta["og:image:alt"] == (
        "Part 1 · Fixtures · Lesson 1.1: A tiny cache. 112 KiB per token"
    )
    assert tiny.footer == [URL]  # its next page is the authors' side: cut


@needs_zensical
def test_the_sitemap_feed_cards_and_search_index_are_the_mkdocs_ones(
    sites: dict[str, Path],
) -> None:
    def sitemap(site: Path) -> set[tuple[str | None, str | None]]:
        root = ET.parse(site / "sitemap.xml").getroot()
        return {(u.findtext(f"{SITEMAP}loc"), u.findtext(f"{SITEMAP}lastmod")) for u in root}

    zensical, mkdocs = sites["zensical"], sites["mkdocs"]
    assert sitemap(zensical) == sitemap(mkdocs)
    assert (URL + "part-1/tiny/", RUN[:10]) in sitemap(zensical)
    for name in ("feed.xml", "robots.txt"):
        assert (zensical / name).read_text() == (mkdocs / name).read_text()
    cards = sorted(p.name for p in (mkdocs / "assets/cards").iterdir())
    assert len(cards) == len(pages(mkdocs))
    for card in cards:
        assert (zensical / "assets/cards" / card).read_bytes() == (
            mkdocs / "assets/cards" / card
        ).read_bytes()
    searched = {
        "zensical": ("search.json", "items"),
        "mkdocs": ("search/search_index.json", "docs"),
    }
    found = {
        engine: {
            item["location"].split("#")[0]
            for item in json.loads((sites[engine] / name).read_text())[key]
        }
        for engine, (name, key) in searched.items()
    }
    assert found["zensical"] == found["mkdocs"] == {"", "part-1/tiny/"}  # no authors' page


@needs_zensical
def test_each_lesson_s_pdf_and_zip_are_the_mkdocs_ones_byte_for_byte(
    sites: dict[str, Path],
) -> None:
    names = {
        engine: sorted(p.name for p in (s / "downloads").iterdir()) for engine, s in sites.items()
    }
    assert names["zensical"] == names["mkdocs"] == ["lesson-1.1.pdf", "lesson-1.1.zip"]
    for name in names["mkdocs"]:
        made = {engine: (site / "downloads" / name).read_bytes() for engine, site in sites.items()}
        assert made["zensical"] == made["mkdocs"], name
    assert made["zensical"][:2] == b"PK"


BROKEN = """
{{ claim("decode.tps_long > decode.tps_short", "Long decoding is faster.") }}
{{ valeu("size.layers") }}
"""


@needs_zensical
def test_a_failing_claim_fails_the_build_as_it_does_with_mkdocs(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs/part-1/tiny.md"
    page.write_text(page.read_text(encoding="utf-8") + BROKEN, encoding="utf-8")
    said = {}
    for engine in ("mkdocs", "zensical"):
        with pytest.raises(PageError) as caught:
            build_site(root, root / "site", engine=engine)
        said[engine] = str(caught.value)
    assert said["zensical"] == said["mkdocs"]
    assert said["zensical"].startswith(
        "the site did not build:\n2 problems in 1 page:\ndocs/part-1/tiny.md:\n"
        "  - claim('decode.tps_long > decode.tps_short'): claim \"Long decoding is faster.\" "
        "does not hold"
    )
    assert "  - valeu('size.layers'): no macro or value named 'valeu'" in said["zensical"]
    assert not (root / "site").exists()


@needs_zensical
def test_pages_zensical_cannot_render_are_named_as_course_check_names_them(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    for name, mistake in (
        ("pinned", "{{ value( }}"),
        ("tiny", "{{ value('size.layers') | nope }}"),
    ):
        page = root / f"docs/part-1/{name}.md"
        page.write_text(page.read_text(encoding="utf-8") + f"\n{mistake}\n", encoding="utf-8")
    with pytest.raises(PageError) as caught:
        build_site(root, root / "site", engine="zensical")
    _, problems = check_site(root)

    def told(message: str) -> list[str]:
        """Each page, and each problem's first line; Zensical calls every error of the template's
        syntax a TemplateSyntaxError (TemplateAssertionError is one)."""
        lines = [line for line in message.splitlines() if line.startswith(("docs/", "  - "))]
        return [line.replace("TemplateAssertionError", "TemplateSyntaxError") for line in lines]

    assert str(caught.value).startswith("the site did not build:\n2 problems in 2 pages:\n")
    assert told(str(caught.value)) == told(report(problems))
    assert [(p.page, p.message.split(":")[0]) for p in problems] == [
        ("docs/part-1/pinned.md", "TemplateSyntaxError"),
        ("docs/part-1/tiny.md", "TemplateAssertionError"),
    ]


@needs_zensical
def test_a_link_to_nowhere_fails_the_build_naming_its_page_and_line(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs/part-1/pinned.md"
    text = page.read_text(encoding="utf-8") + "\nSee [the notes](nope.md).\n"
    page.write_text(text, encoding="utf-8")
    line = text.splitlines().index("See [the notes](nope.md).") + 1
    with pytest.raises(PageError) as caught:  # mkdocs.yml's `strict: true`, read by Zensical
        build_site(root, root / "site", engine="zensical")
    assert str(caught.value) == (
        f"the site did not build:\ndocs/part-1/pinned.md:{line}:17: page does not exist"
    )


@pytest.mark.skipif(ZENSICAL, reason="Zensical is installed here")
def test_without_zensical_the_build_says_how_to_get_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    with pytest.raises(PageError) as caught:
        build_site(root, root / "site", engine="zensical")
    assert str(caught.value) == (
        "--engine zensical: Zensical is not installed here (pip install zensical==0.0.73; the "
        "`site` extra does not bring it)"
    )
    with pytest.raises(PageError, match=r"no build engine 'hugo' \(engines: mkdocs, zensical\)"):
        build_site(root, root / "site", engine="hugo")


def test_the_site_extra_does_not_bring_zensical() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needs = [*project["dependencies"], *project["optional-dependencies"]["site"]]
    assert any(need.startswith("mkdocs-material") for need in needs)
    assert not [need for need in needs if "zensical" in need]


def test_zensical_s_configuration_is_the_course_s_with_the_adapter(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COURSE_SITE_URL", "https://example.net/c/")
    config = zensical_config(project, None)
    assert "hooks" not in config
    assert config["site_url"] == "https://example.net/c/"  # mkdocs.yml's !ENV, as MkDocs reads it
    assert zensical_config(project, URL)["site_url"] == URL
    assert (config["docs_dir"], config["site_dir"]) == ("docs", "site")
    assert config["theme"]["variant"] == "classic"
    assert config["theme"]["custom_dir"] == str(project / "overrides")
    assert config["markdown_extensions"][-1] == ADAPTER
    macros = next(p["macros"] for p in config["plugins"] if isinstance(p, dict) and "macros" in p)
    assert macros["module_name"] == ADAPTER
    assert macros["j2_extensions"] == [f"{ADAPTER}.PageUndefined"]
    assert config["nav"][0] == {  # the outline's, as MkDocs' on_config hook makes it
        "Course": ["index.md", {"Part 1 · Fixtures": [{"1.1 · A tiny cache": "part-1/tiny.md"}]}]
    }


NO_MKDOCS = """
import sys
from pathlib import Path

sys.modules["mkdocs"] = None  # import mkdocs, or anything under it, fails from here on
from course.site import build_site

site = build_site(Path(sys.argv[1]), Path(sys.argv[2]), engine=sys.argv[3]).site_dir
print(len(list(site.rglob("index.html"))), "pages")
"""


def test_the_build_and_the_zensical_adapter_load_without_mkdocs() -> None:
    """The page logic imports MkDocs in its MkDocs adapter only (which mkdocs-macros loads)."""
    code = f"import sys; sys.modules['mkdocs'] = None; import course.cli, course.site, {ADAPTER}"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@needs_zensical
def test_zensical_builds_the_site_without_mkdocs(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    done = subprocess.run(
        [sys.executable, "-c", NO_MKDOCS, str(root), str(tmp_path / "site"), "zensical"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "11 pages"


@pytest.mark.parametrize(
    ("url", "src", "read"),
    [
        ("../../before-you-start/", "part-1/tiny.md", "../before-you-start/"),
        ("code/at_length.py.html", "part-1/tiny.md", "tiny/code/at_length.py.html"),
        ("../../#lesson-x", "part-1/tiny.md", "../#lesson-x"),
        ("#lesson-x", "part-1/tiny.md", "#lesson-x"),
        ("https://example.org/", "part-1/tiny.md", "https://example.org/"),
        ("/abs/", "part-1/tiny.md", "/abs/"),
        ("part-1/tiny/", "index.md", "part-1/tiny/"),
        ("../x/", "part-1/index.md", "../x/"),
    ],
)
def test_a_raw_link_is_written_as_zensical_reads_it(url: str, src: str, read: str) -> None:
    """Zensical reads every relative URL of a page from its source file, one folder above the
    page's URL (an index page's URL is its folder's)."""
    assert from_source(url, src) == read
