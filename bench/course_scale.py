"""A course of 50 lessons: how long `course build` takes, and how much memory, as the course grows.

The course is made in a temporary folder from the site machinery of this checkout and 50 copies
of the test fixture lesson (tests/fixtures/site/: its lab, its three records, its page and data
file), each under its own id (`l01` … `l50`), in five parts of ten lessons listed in
docs/course.yml. Then, each `course build` a separate process (`python -m course`):

    full build        no site/, no .cache/: HTML, 50 figures, 50 PDFs, 50 zips
    no change         the same build again (PDFs and zips reused)       target ≤ 10 s
    one record        a new good run of one lesson (l25) recorded        target ≤ 2 × no change
                      only that lesson's PDF and zip are remade (checked from the cache's keys)
    CPU               the CPU seconds of a build, its PDF printing processes included: unlike
                      the wall time, it does not grow when other work shares the cores
    peak memory       the largest resident set of each build, its PDF printing processes included

The no-change and one-record builds are repeated (`--repeat`, a new record each time) and the
fastest is shown.

and the 50 PDFs printed from the built site with an empty cache, each time in a fresh process,
in one process (`jobs=1`) against one per core (`jobs=2` on the 2-core machine), the best of
`--repeat` runs (the machine's load average is printed: other work on the cores shows there):

    .venv/bin/python bench/course_scale.py [--lessons 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "site"
LESSON = "tiny-cache"
CHANGED = "l25"


def make_course(root: Path, count: int) -> list[str]:
    """The repository's site machinery and `count` copies of the fixture lesson; their ids."""
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    for name in ("macros", "overrides", "docs", "figures"):
        shutil.copytree(FIXTURE / name if name == "figures" else REPO / name, root / name)
    for page in (root / "docs").rglob("*.md"):  # the repository's own lessons need its records
        if "lesson:" in page.read_text(encoding="utf-8").split("\n---", 1)[0]:
            page.unlink()
            page.with_suffix(".yml").unlink(missing_ok=True)
    ids = [f"l{n:02d}" for n in range(1, count + 1)]
    parts = []
    for part in range(1, (count + 9) // 10 + 1):
        members = ids[(part - 1) * 10 : part * 10]
        lessons = "\n".join(
            f"      - {{id: {i}, title: Lesson {i} of a tiny cache}}" for i in members
        )
        parts.append(
            f"  - number: {part}\n    title: Part {part} of the scale test\n    lessons:\n{lessons}"
        )
        for lesson in members:
            _copy_lesson(root, lesson, part)
    authors = "authors: [writing-a-lesson.md]\n"
    (root / "docs" / "course.yml").write_text("parts:\n" + "\n".join(parts) + "\n" + authors)
    return ids


def _copy_lesson(root: Path, lesson: str, part: int) -> None:
    lab = root / "lab" / lesson
    shutil.copytree(FIXTURE / "lab" / LESSON, lab)
    recipe = lab / "lab.yml"
    recipe.write_text(recipe.read_text().replace(f"lesson: {LESSON}", f"lesson: {lesson}"))
    shutil.copytree(FIXTURE / "build" / LESSON, root / "build" / lesson)
    for run in (root / "build" / lesson).glob("*/run.json"):
        record = json.loads(run.read_text())
        record["lesson"] = lesson
        record["lab_file"] = f"lab/{lesson}/lab.yml"
        run.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    folder = root / "docs" / f"part-{part}"
    folder.mkdir(parents=True, exist_ok=True)
    page = (FIXTURE / "docs" / "part-1" / "tiny.md").read_text()
    page = page.replace("title: A tiny cache\n", "").replace(
        f"lesson: {LESSON}", f"lesson: {lesson}"
    )
    (folder / f"{lesson}.md").write_text(page)
    shutil.copy(FIXTURE / "docs" / "part-1" / "tiny.yml", folder / f"{lesson}.yml")


def record_again(root: Path, lesson: str, day: int) -> None:
    """A new good run of one lesson: its newest good run again on `day` of December 2026,
    decoding a little faster."""
    folder = root / "build" / lesson
    good = sorted(
        p for p in folder.iterdir() if json.loads((p / "run.json").read_text())["status"] == "ok"
    )
    new_id = f"2026-12-{day:02d}T090000Z-h200"
    shutil.copytree(good[-1], folder / new_id)
    record = json.loads((folder / new_id / "run.json").read_text())
    started, ended = f"2026-12-{day:02d}T09:00:00Z", f"2026-12-{day:02d}T09:01:40Z"
    record.update(run_id=new_id, started=started, ended=ended)
    decode = next(s for s in record["steps"] if s["id"] == "decode")
    decode["values"]["tps_short"]["value"] = 312.4 + day
    (folder / new_id / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def build(root: Path) -> tuple[float, float, int]:
    """One `course build` in its own process: (wall seconds, CPU seconds of it and its PDF
    printers, peak resident set of the largest of them in MiB)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    env.pop("COURSE_SITE_URL", None)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "course", "--root", str(root), "build"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    error = process.stderr.read().decode() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"course build failed:\n{error}")
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss // 1024  # ru_maxrss is in KiB on Linux


def kept_keys(root: Path) -> dict[str, str]:
    """Lesson -> the keys of its kept PDF and zip."""
    keys = {}
    for folder in sorted((root / ".cache" / "package").iterdir()):
        if folder.name.startswith("."):
            continue  # the kept figures and cards
        keys[folder.name] = "".join(
            (folder / name).read_text() for name in ("page.pdf.key", "lesson.zip.key")
        )
    return keys


def print_pdfs(root: Path, jobs: int) -> float:
    """Seconds to print every lesson's PDF from the built site, with an empty cache, in a fresh
    process (as `course build` would), `jobs` processes printing."""
    code = (
        "import sys, tempfile, time; from pathlib import Path; "
        "from course.package.lessons import package_lessons; "
        "c = tempfile.mkdtemp(); t = time.perf_counter(); "
        f"done = package_lessons(Path({str(root)!r}), Path({str(root / 'site')!r}), "
        f"cache_dir=Path(c), jobs={jobs}); "
        "assert not any(d.pdf_reused for d in done); print(time.perf_counter() - t)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def _spin(_: int) -> int:
    total = 0
    for i in range(3_000_000):
        total += i * i
    return total


def machine_ceiling(cores: int) -> float:
    """What `cores` processes gain over one on this machine now, for pure arithmetic: the most
    any parallel work can gain (less when other work shares the cores)."""
    from concurrent.futures import ProcessPoolExecutor

    started = time.perf_counter()
    for n in range(cores * 2):
        _spin(n)
    one = time.perf_counter() - started
    with ProcessPoolExecutor(cores) as pool:
        started = time.perf_counter()
        list(pool.map(_spin, range(cores * 2)))
        many = time.perf_counter() - started
    return one / many


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lessons", type=int, default=50)
    parser.add_argument("--keep", type=Path, help="make the course here and keep it")
    parser.add_argument(
        "--repeat", type=int, default=3, help="the best of so many (not the full build)"
    )
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="course-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    ids = make_course(work, args.lessons)
    print(f"{len(ids)} lessons in {work}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    full = build(work)
    print(f"full build        {full[0]:6.1f} s   CPU {full[1]:6.1f} s   peak {full[2]:,} MiB")
    same = min(build(work) for _ in range(args.repeat))
    print(
        f"no change         {same[0]:6.1f} s   CPU {same[1]:6.1f} s   peak {same[2]:,} MiB   "
        "(target ≤ 10 s)"
    )
    ones, remade = [], set()
    for day in range(1, args.repeat + 1):
        before = kept_keys(work)
        record_again(work, CHANGED, day)
        ones.append(build(work))
        after = kept_keys(work)
        remade |= {lesson for lesson in after if after[lesson] != before.get(lesson)}
    one = min(ones)
    print(
        f"one record        {one[0]:6.1f} s   CPU {one[1]:6.1f} s   peak {one[2]:,} MiB   "
        f"({one[0] / same[0]:.2f} × no change, target ≤ 2; remade: {', '.join(sorted(remade))})"
    )
    cores = os.cpu_count() or 1
    serials, parallels, ceilings = [], [], []
    for _ in range(args.repeat):  # interleaved, so that other work on the cores hits both alike
        serials.append(print_pdfs(work, 1))
        parallels.append(print_pdfs(work, cores))
        ceilings.append(machine_ceiling(cores))
    serial, parallel = min(serials), min(parallels)
    print(
        f"{len(ids)} PDFs          {serial:6.1f} s in one process, {parallel:.1f} s in "
        f"{os.cpu_count()}: speed-up {serial / parallel:.2f} (best of {args.repeat}; load "
        f"{os.getloadavg()[0]:.1f}; a pure-Python loop gains {max(ceilings):.2f} on these cores)"
    )
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
