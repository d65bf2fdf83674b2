"""How long `course build` takes, cold and warm, and what the PDFs and zips add to mkdocs.

A clean checkout of HEAD (`git archive`) is made in a temporary folder, then timed:

    full build        `course build` with no site/ and no .cache/ (HTML, PDFs, zips)
    no-change build   `course build` again, nothing changed (PDFs and zips reused from .cache/)
    plain mkdocs      `mkdocs build` of the same pages into another folder (HTML only)
    PDF per page      WeasyPrint printing each lesson page, in one process with an empty cache
    PDF, long page    the same for the fixture page with every lab/kv-cache/*.py file appended
                      as a listing (about 1,000 lines of code, like a real lesson's listings)

The checkout is the repository itself when it has lesson pages with records; otherwise (or with
`--fixture`) its site machinery with the test fixture lesson (tests/fixtures/site/), as the tests
build it. Each timing is repeated and the median is printed, with the PDF and zip sizes.

    .venv/bin/python bench/build_speed.py [--repeat 3] [--fixture]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def checkout(dst: Path) -> None:
    """The files of HEAD, as a fresh clone has them."""
    data = subprocess.run(
        ["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dst, filter="data")


def with_fixture(root: Path) -> None:
    """Keep the site machinery, swap the lessons for the fixture lesson and its records."""
    for page in (root / "docs").rglob("*.md"):
        if "lesson:" in page.read_text(encoding="utf-8").split("\n---", 1)[0]:
            page.unlink()
    shutil.copytree(root / "tests" / "fixtures" / "site", root, dirs_exist_ok=True)


def has_lessons(root: Path) -> bool:
    from course.pages.lessons import lesson_pages
    from course.record.store import Store

    pages = lesson_pages(root / "docs")
    store = Store(root / "build")
    return bool(pages) and all(store.newest_good(p.meta.lesson or "") for p in pages)


def timed(command: list[str], cwd: Path) -> float:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.perf_counter()
    subprocess.run(
        command, cwd=cwd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    return time.perf_counter() - started


def pdf_seconds(root: Path) -> list[tuple[str, float, int | None]]:
    """Print every lesson page's PDF again with an empty cache: (lesson, seconds, pages)."""
    from course.package.lessons import package_lessons

    with tempfile.TemporaryDirectory() as cache:
        done = package_lessons(root, root / "site", cache_dir=Path(cache))
    return [(d.lesson, d.pdf_seconds, d.pdf_pages) for d in done]


def with_long_listings(root: Path) -> None:
    """Append the KV-cache lab's Python files to the fixture page as listings, with prose
    between.
    """
    page = root / "docs" / "part-1" / "tiny.md"
    extra = []
    for source in sorted((REPO / "lab" / "kv-cache").glob("*.py")):
        fence = "`" * 4
        extra.append(
            f'\n## {source.name}\n\n{{% raw %}}\n{fence}python title="{source.name}"\n'
            f"{source.read_text(encoding='utf-8')}\n{fence}\n{{% endraw %}}\n"
        )
        extra.append("\n" + "The listing above is read line by line in the text. " * 20 + "\n")
    page.write_text(page.read_text(encoding="utf-8") + "".join(extra), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=3, help="times each build is timed (median shown)"
    )
    parser.add_argument(
        "--fixture",
        action="store_true",
        help="build the fixture lesson even if the repo has lessons",
    )
    args = parser.parse_args()

    course, mkdocs = [str(BIN / "course")], [str(BIN / "mkdocs")]
    full, warm, plain, per_page = [], [], [], []
    label = ""
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "course"
            checkout(root)
            if args.fixture or not has_lessons(root):
                with_fixture(root)
                label = "the fixture lesson (tests/fixtures/site/)"
            else:
                label = "the repository's lessons"
            full.append(timed([*course, "--root", str(root), "build"], root))
            warm.append(timed([*course, "--root", str(root), "build"], root))
            plain.append(timed([*mkdocs, "build", "-q", "-d", str(Path(tmp) / "plain")], root))
            per_page.extend(pdf_seconds(root))
            downloads = sorted((root / "site" / "downloads").iterdir())
            sizes = {p.name: p.stat().st_size for p in downloads}

    def med(values: list[float]) -> float:
        return statistics.median(values)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "course"
        checkout(root)
        with_fixture(root)
        with_long_listings(root)
        timed([*course, "--root", str(root), "build"], root)
        long_page = pdf_seconds(root) + pdf_seconds(root)

    renders = [s for _, s, _ in per_page]
    print(
        f"course build of {label}, {args.repeat} clean checkouts of HEAD, {os.cpu_count()} CPU "
        "cores\n"
    )
    print("| measure | median | runs |")
    print("| --- | --- | --- |")
    print(
        f"| full `course build` (HTML, PDFs, zips), clean checkout | {med(full):.2f} s | "
        f"{', '.join(f'{v:.2f}' for v in full)} |"
    )
    print(
        f"| `course build` again, nothing changed | {med(warm):.2f} s | "
        f"{', '.join(f'{v:.2f}' for v in warm)} |"
    )
    print(
        f"| plain `mkdocs build` of the same pages | {med(plain):.2f} s | "
        f"{', '.join(f'{v:.2f}' for v in plain)} |"
    )
    print(
        f"| PDF printing per lesson page | {med(renders):.2f} s | "
        f"{', '.join(f'{lesson} {s:.2f} ({n} pages)' for lesson, s, n in per_page)} |"
    )
    print(
        f"| PDF printing, the fixture page with about 1,000 lines of listings | "
        f"{med([s for _, s, _ in long_page]):.2f} s | "
        f"{', '.join(f'{s:.2f} ({n} pages)' for _, s, n in long_page)} |"
    )
    print(
        f"\nfull build / plain mkdocs: {med(full) / med(plain):.2f}; "
        f"no-change build / plain mkdocs: {med(warm) / med(plain):.2f}"
    )
    print("sizes: " + ", ".join(f"{name} {size / 1024:.0f} KiB" for name, size in sizes.items()))


if __name__ == "__main__":
    main()
