"""Figures read the files a step kept, are kept between builds keyed by what they read, and a
figure script's exception names its file and line."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest
from support import LESSON, RUN, make_project

from course.diff import compare
from course.pages.context import PageContext
from course.pages.evaluate import PageSide, evaluate_pages, figure_inputs
from course.pages.lessons import read_meta
from course.pages.macros import MACROS
from course.record.models import Run
from course.record.store import Store

HISTOGRAM = '''\
"""The 200 latencies the decode step kept, as a histogram; notes each drawing in draws.log."""

from pathlib import Path


def draw(fig, data):
    latencies = data.kept_json("decode", "results/latency.json")["latencies_ms"]
    Path(__file__).with_name("draws.log").open("a").write("drawn\\n")
    ax = fig.subplots()
    ax.hist(latencies, bins=20)
    ax.axvline(data.value("decode.ms_long"), color="black")
'''
BROKEN = '''\
"""A figure whose script fails on its seventh line."""


def draw(fig, data):
    ax = fig.subplots()
    numbers = {"a": 1}
    ax.plot([numbers["b"]])
'''


def keep_file(root: Path, run_id: str, seed: int) -> str:
    """Give the decode step of a run a kept file of 200 latencies; its sha256."""
    folder = root / "build" / LESSON / run_id
    rng = random.Random(seed)
    data = json.dumps({"latencies_ms": [rng.gauss(5.0, 0.5) for _ in range(200)]}).encode()
    target = folder / "files" / "decode" / "results" / "latency.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    record = json.loads((folder / "run.json").read_text())
    step = next(s for s in record["steps"] if s["id"] == "decode")
    sha = hashlib.sha256(data).hexdigest()
    step["files"] = [{"path": "results/latency.json", "bytes": len(data), "sha256": sha}]
    (folder / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    return sha


def copy_run(root: Path, run_id: str, new_id: str) -> None:
    lesson = root / "build" / LESSON
    shutil.copytree(lesson / run_id, lesson / new_id)
    record = json.loads((lesson / new_id / "run.json").read_text())
    record["run_id"] = new_id
    (lesson / new_id / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    keep_file(root, RUN, seed=1)
    (root / "figures" / "latency_hist.py").write_text(HISTOGRAM)
    (root / "figures" / "broken.py").write_text(BROKEN)
    return root


def context(root: Path) -> PageContext:
    """The fixture lesson page as the build sees it, drawing into root/site, keeping figures."""
    meta, raw, _ = read_meta(root / "docs/part-1/tiny.md", "docs/part-1/tiny.md")
    return PageContext(
        root, "part-1/tiny.md", meta, raw, "part-1/tiny/", root / "site", root / ".cache/figures"
    )


def draw(root: Path, name: str) -> tuple[str, PageContext]:
    ctx = context(root)
    return MACROS["figure"](ctx, name, alt="A histogram of 200 latencies."), ctx


def draws(root: Path) -> int:
    log = root / "figures" / "draws.log"
    return len(log.read_text().splitlines()) if log.is_file() else 0


def test_a_figure_draws_a_histogram_from_a_kept_json_file(project: Path) -> None:
    shown, ctx = draw(project, "latency_hist")
    assert ctx.problems == []
    assert 'src="../../assets/figures/tiny-cache/latency_hist.svg"' in shown
    svg = project / "site/assets/figures/tiny-cache/latency_hist.svg"
    assert svg.read_text().count("<path") > 20  # twenty bars and the axes
    assert draws(project) == 1


def test_the_kept_file_hash_is_part_of_the_cache_key(project: Path) -> None:
    draw(project, "latency_hist")
    png = project / "site/assets/figures/tiny-cache/latency_hist.png"
    first = png.read_bytes()
    manifest = json.loads((project / ".cache/figures/tiny-cache/latency_hist.json").read_text())
    sha = hashlib.sha256(
        (project / "build" / LESSON / RUN / "files/decode/results/latency.json").read_bytes()
    ).hexdigest()
    assert ["file", "decode", "results/latency.json", sha] in manifest["reads"]

    shutil.rmtree(project / "site")
    draw(project, "latency_hist")  # nothing changed: the kept drawing is copied
    assert draws(project) == 1 and png.read_bytes() == first

    newer = "2026-11-23T090000Z-h200"  # a new run with the same numbers and the same file
    copy_run(project, RUN, newer)
    draw(project, "latency_hist")
    assert draws(project) == 1

    keep_file(project, newer, seed=2)  # the same run, its kept file changed: drawn again
    draw(project, "latency_hist")
    assert draws(project) == 2 and png.read_bytes() != first

    (project / "figures/latency_hist.py").write_text(HISTOGRAM + "\n# edited\n")
    draw(project, "latency_hist")  # the script changed: drawn again
    assert draws(project) == 3


def test_course_diff_names_a_figure_whose_kept_file_changed(project: Path) -> None:
    uses, error = figure_inputs(project, context(project), "latency_hist")
    assert error is None
    assert uses == ["decode.ms_long", "file:decode/results/latency.json"]

    page = project / "docs/part-1/tiny.md"
    page.write_text(page.read_text() + '\n{{ figure("latency_hist", alt="Latencies.") }}\n')
    store = Store(project / "build")
    copy_run(project, RUN, "2026-11-23T090000Z-h200")
    same = compare(store.get(LESSON, RUN), store.get(LESSON, "2026-11-23T090000Z-h200"), pages)
    assert same.figures == []
    keep_file(project, "2026-11-23T090000Z-h200", seed=2)
    moved = compare(store.get(LESSON, RUN), store.get(LESSON, "2026-11-23T090000Z-h200"), pages)
    assert moved.values == same.values  # no captured value moved, only the kept file
    assert moved.figures == ["docs/part-1/tiny.md: latency_hist"]


def pages(run: Run) -> PageSide:
    return evaluate_pages(run.folder.parents[2], LESSON, run)


def test_a_file_the_step_did_not_keep_is_named_with_the_kept_ones(project: Path) -> None:
    script = project / "figures" / "latency_hist.py"
    script.write_text(HISTOGRAM.replace("results/latency.json", "results/latencies.json"))
    _, ctx = draw(project, "latency_hist")
    (problem,) = ctx.problems
    assert problem.message == (
        f"figures/latency_hist.py: step 'decode' of run {RUN} kept no file "
        "'results/latencies.json' (its kept files: results/latency.json; a step keeps the files "
        "listed under its `files:` in lab.yml)"
    )


def test_an_exception_in_a_figure_script_names_its_file_and_line(project: Path) -> None:
    _, ctx = draw(project, "broken")
    (problem,) = ctx.problems
    assert problem.message == (
        "figures/broken.py, line 7, in draw: `ax.plot([numbers[\"b\"]])`: KeyError: 'b'"
    )
    (project / "figures/broken.py").write_text("import math\n\nmath.sqrt(-1)\n")
    _, ctx = draw(project, "broken")
    assert ctx.problems[0].message == (
        "figures/broken.py, line 3, in <module>: `math.sqrt(-1)`: ValueError: math domain error"
    )
    (project / "figures/broken.py").write_text("def draw(fig, data)\n    pass\n")
    _, ctx = draw(project, "broken")
    assert ctx.problems[0].message == "figures/broken.py, line 1: SyntaxError: expected ':'"
