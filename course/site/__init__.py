"""The site stages: `build` (an engine's HTML, the steps after it, the PDFs and zips, into site/),
`check` (values, claims and the page checks of `pages/lint/`, without HTML), `serve`.

    build.py           build_site: the engine, the steps after the HTML, the packages, the swap
    after.py           the steps after the HTML that MkDocs runs as hooks, for an engine that does not
    mkdocs_engine.py   MkDocs: the build and `course serve`
    zensical_engine.py Zensical, where it is installed: its configuration and its staged project
    check.py           `course check`
"""

from .build import ENGINES, BuildResult, LessonPage, build_site
from .check import Checked, check_or_fail, check_pages, check_site, pinned_behind
from .mkdocs_engine import CONFIG, serve_site

__all__ = [
    "CONFIG",
    "ENGINES",
    "BuildResult",
    "Checked",
    "LessonPage",
    "build_site",
    "check_or_fail",
    "check_pages",
    "check_site",
    "pinned_behind",
    "serve_site",
]
