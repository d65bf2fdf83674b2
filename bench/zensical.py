"""MkDocs against Zensical on the same course: build time, no-change rebuild time, page weight.

    /work/venvs/zen/bin/python bench/zensical.py [--repeat 3] [--course repo|fixture]

Needs Zensical (pip install zensical==0.0.73) beside the `site` extra. For each repeat, the two
engines in turn (the order alternating, so both see the shared machine's same hours):

  clean build        `build_site` with an empty cache: figures drawn, PDFs printed, zips packed
  no-change rebuild  `build_site` again with that cache: figures, PDFs and zips reused
  HTML alone         the engine and the steps after its HTML (what `course build` runs before the
                     page checks and the packages), again with the cache kept

then each engine's build of a lesson page loaded in Debian's Chromium from a local server: the
bytes of the HTML document, its stylesheets and its scripts as sent (uncompressed) and as a
gzip-compressing host sends them; and the whole site's bytes on disk without the downloads.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
# this file's folder first on the path would make `import zensical` import this file
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO / "tests"))

from support import ZENSICAL, make_project  # noqa: E402 - tests/ is on the path

from course.site import ENGINES, build_site  # noqa: E402
from course.site.after import Written, run_after  # noqa: E402


def one_round(root: Path, engine: str, cache: Path, site: Path, scratch: Path) -> dict[str, float]:
    """The three timings of one engine, from an empty cache."""
    started = time.perf_counter()
    build_site(root, site, cache, engine=engine)
    built = time.perf_counter()
    build_site(root, site, cache, engine=engine)
    rebuilt = time.perf_counter()
    html_alone(root, engine, cache, scratch)
    done = time.perf_counter()
    return {
        "clean build": built - started,
        "no-change rebuild": rebuilt - built,
        "HTML alone, cache kept": done - rebuilt,
    }


def html_alone(root: Path, engine: str, cache: Path, out: Path) -> None:
    """The engine's HTML and the steps after it, into `out` (emptied first)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config, _ = ENGINES[engine].run(root, out, cache, None)
    run_after(Written(root, out, cache, config), ENGINES[engine].hooked)


def _site_build_bench() -> ModuleType:
    """bench/site_build.py, loaded from its file (this folder is off the import path)."""
    spec = importlib.util.spec_from_file_location("site_build", REPO / "bench" / "site_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page_weight(site: Path, url: str) -> tuple[int, int, list[tuple[str, str, int]]]:
    """(bytes, gzip bytes, [(type, path, bytes)]) of what the browser fetched for the page:
    bench/site_build.py's weighing, summed."""
    own, _ = _site_build_bench().page_weight(site, url)
    listed = [(kind, path, raw) for kind, path, raw, _ in own]
    return sum(r for *_, r, _ in own), sum(g for *_, g in own), listed


def on_disk(site: Path) -> int:
    """The site's bytes without its downloads (PDFs, zips)."""
    return sum(
        p.stat().st_size for p in site.rglob("*") if p.is_file() and "downloads" not in p.parts
    )


def main() -> None:
    """Print the figures for bench/README.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--course", choices=["repo", "fixture"], default="repo")
    args = parser.parse_args()
    if not ZENSICAL:
        sys.exit("bench/zensical.py needs Zensical: pip install zensical==0.0.73")
    engines = list(ENGINES)
    times: dict[str, dict[str, list[float]]] = {e: {} for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = REPO if args.course == "repo" else make_project(work / "project")
        page = "part-2/kv-cache/" if args.course == "repo" else "part-1/tiny/"
        for n in range(args.repeat):
            for engine in engines if n % 2 == 0 else engines[::-1]:
                cache, site = work / f"cache-{engine}-{n}", work / f"site-{engine}"
                row = times[engine]
                for what, seconds in one_round(root, engine, cache, site, work / "html").items():
                    row.setdefault(what, []).append(seconds)
                shutil.rmtree(cache)
                print(f"  {n + 1}/{args.repeat} {engine}: {row}", file=sys.stderr)
        weights = {e: page_weight(work / f"site-{e}", page) for e in engines}
        disk = {e: on_disk(work / f"site-{e}") for e in engines}
    print(f"course: {args.course}; {args.repeat} repeats; medians (min–max), seconds")
    print(f"| what | {' | '.join(engines)} |")
    print(f"| --- | {' | '.join('---' for _ in engines)} |")
    for what in times[engines[0]]:
        cells = [
            f"{statistics.median(times[e][what]):.1f} ({min(times[e][what]):.1f}–"
            f"{max(times[e][what]):.1f})"
            for e in engines
        ]
        print(f"| {what} | {' | '.join(cells)} |")
    print(f"| lesson page {page}: HTML + CSS + JS, bytes | "
          f"{' | '.join(f'{weights[e][0]:,}' for e in engines)} |")  # fmt: skip
    print(f"| the same, gzip | {' | '.join(f'{weights[e][1]:,}' for e in engines)} |")
    print(f"| site without downloads, bytes | {' | '.join(f'{disk[e]:,}' for e in engines)} |")
    for engine in engines:
        print(f"{engine}: " + ", ".join(f"{path} {raw:,} B" for _, path, raw in weights[engine][2]))


if __name__ == "__main__":
    main()
