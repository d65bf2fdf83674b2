"""Site build time and the weight of a lesson page (HTML + CSS + JS, without images).

    .venv/bin/python bench/site_build.py [--repeat 3]

Builds the repository's site and the fixture lesson site (tests/fixtures/site/) into temporary
folders, timing each build; then loads the fixture lesson page in Debian's Chromium from a
local server and sums what the browser fetched for the page itself: the HTML document, its
stylesheets and its scripts, as sent (uncompressed, as Python's server sends them) and as a
gzip-compressing host would send them. Images, the search index and the sitemap are listed
apart.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support import free_port, make_project, serving  # noqa: E402 - tests/ is on the path now

from course.site import build_site  # noqa: E402

PAGE_TYPES = {"document", "stylesheet", "script"}


def time_builds(root: Path, repeat: int) -> list[float]:
    """Wall seconds of `repeat` fresh builds of the site at root."""
    seconds = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            build_site(root, Path(out) / "site")
            seconds.append(time.perf_counter() - started)
    return seconds


def page_weight(
    site: Path, url: str
) -> tuple[list[tuple[str, str, int, int]], list[tuple[str, str, int]]]:
    """(page requests: type, path, bytes, gzip bytes), (other requests: type, path, bytes)."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    with serving(site, port) as base, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-background-networking"],
        )
        tab = browser.new_page()
        seen: list[tuple[str, str]] = []
        tab.on("requestfinished", lambda r: seen.append((r.resource_type, r.url)))
        tab.goto(base + url, wait_until="networkidle")
        browser.close()
        own, other = [], []
        for kind, address in seen:
            body = urllib.request.urlopen(address).read()
            path = address.removeprefix(base)
            if kind in PAGE_TYPES:
                own.append((kind, path, len(body), len(gzip.compress(body, 6))))
            else:
                other.append((kind, path, len(body)))
    return own, other


def main() -> None:
    """Print the figures for bench/README.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--page",
        default="part-2/kv-cache/",
        help="the repository's lesson page to weigh (default: part-2/kv-cache/); "
        "'fixture' weighs the fixture lesson instead",
    )
    args = parser.parse_args()
    repo_times = time_builds(REPO, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp) / "project")
        fixture_times = time_builds(project, args.repeat)
        if args.page == "fixture":
            site, page = build_site(project, project / "site").site_dir, "part-1/tiny/"
        else:
            site, page = build_site(REPO, Path(tmp) / "repo-site").site_dir, args.page
        own, other = page_weight(site, page)
    print(f"repository site build: median {statistics.median(repo_times):.2f} s of {repo_times}")
    print(
        f"fixture site build:    median {statistics.median(fixture_times):.2f} s of {fixture_times}"
    )
    print(f"lesson page {page} (HTML + CSS + JS):")
    for kind, path, raw, packed in own:
        print(f"  {kind:10} {path:60} {raw:>9,} B  gzip {packed:>8,} B")
    print(
        f"  {'total':10} {'':60} {sum(r for *_, r, _ in own):>9,} B  gzip "
        f"{sum(g for *_, g in own):>8,} B"
    )
    print("other requests (not counted):")
    for kind, path, raw in other:
        print(f"  {kind:10} {path:60} {raw:>9,} B")


if __name__ == "__main__":
    main()
