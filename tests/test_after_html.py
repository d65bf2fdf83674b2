"""The steps after the HTML (`course/site/after.py`), which an engine without hooks leaves to the
build, checked against MkDocs, whose hooks do the same: on a copy of the MkDocs-built fixture site
with the sitemap's dates and the landing page's reading times taken out, the steps put back what
MkDocs wrote."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from support import make_project

from course.errors import PageError
from course.pages.context import Problem
from course.pages.state import STATE, open_page
from course.site import build_site
from course.site.after import AFTER_HTML, Written, page_problems, reading, sitemap_dates

URL = "https://example.org/course/"


def test_the_steps_put_back_the_dates_and_reading_times_mkdocs_wrote(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    built = build_site(root, tmp_path / "mkdocs", tmp_path / "cache", URL).site_dir
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    sitemap = (copy / "sitemap.xml").read_text(encoding="utf-8")
    (copy / "sitemap.xml").write_text(re.sub(r"\s*<lastmod>[^<]*</lastmod>", "", sitemap))
    home = (copy / "index.html").read_text(encoding="utf-8")
    emptied = re.sub(r'(data-course-reading="[^"]+">)[^<]*', r"\1…", home)
    assert emptied != home
    (copy / "index.html").write_text(emptied, encoding="utf-8")
    site = Written(root, copy, tmp_path / "cache", {"site_url": URL})
    sitemap_dates(site)
    reading(site)  # from the words of the pages the build just rendered
    dated = re.compile(r"<loc>([^<]*)</loc>\s*<lastmod>([^<]*)</lastmod>")
    assert dated.findall((copy / "sitemap.xml").read_text()) != []
    assert sorted(dated.findall((copy / "sitemap.xml").read_text())) == sorted(
        dated.findall(sitemap)
    )
    assert (copy / "index.html").read_text(encoding="utf-8") == home


def test_the_page_problems_stop_the_build_as_one_failure(tmp_path: Path) -> None:
    assert [name for name, _ in AFTER_HTML] == [
        "page problems",
        "previous and next",
        "reading times",
        "sitemap dates",
        "social cards",
        "feed and robots.txt",
    ]
    STATE.start()
    root = make_project(tmp_path / "project")
    page_problems(Written(root, tmp_path, tmp_path))  # none: nothing to say
    context = open_page(root, "part-1/tiny.md", {}, "part-1/tiny/", tmp_path, None)
    context.problems.append(Problem("docs/part-1/tiny.md", "value('x.y')", "no step 'x'"))
    with pytest.raises(PageError) as caught:
        page_problems(Written(root, tmp_path, tmp_path))
    assert str(caught.value) == (
        "the site did not build:\n1 problem in 1 page:\ndocs/part-1/tiny.md:\n"
        "  - value('x.y'): no step 'x'"
    )
    STATE.start()
