"""The authors' side: the freshness page and the run histories, rendered from the fixture lesson's
records (no HTML build needed)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from support import LESSON, OLDER, RUN, make_project

from course.pages.lessons import PageEntry, read_meta
from course.pages.render import render_page

FAILED = "2026-11-21T090000Z-h200"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture project; the newest good run's decode step reports its peak GPU memory."""
    project = make_project(tmp_path_factory.mktemp("authors") / "project")
    run_file = project / "build" / LESSON / RUN / "run.json"
    record = json.loads(run_file.read_text(encoding="utf-8"))
    decode = next(s for s in record["steps"] if s["id"] == "decode")
    decode["values"]["peak_gpu_memory"] = {"value": 1610612736, "type": "int", "unit": "B"}
    run_file.write_text(json.dumps(record, indent=2), encoding="utf-8")
    return project


def rendered(root: Path, src: str) -> str:
    meta, raw, _ = read_meta(root / "docs" / src, f"docs/{src}")
    done = render_page(root, PageEntry(src, meta, raw))
    assert done.context.problems == [] and done.markdown is not None
    return done.markdown


def rows(markdown: str, label: str) -> list[list[str]]:
    """The cells of the table with this aria-label, as text."""
    table = markdown[markdown.index(f'aria-label="{label}"') :]
    table = table[: table.index("</table>")]
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL):
        cells = re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.DOTALL)
        found.append([html.unescape(re.sub(r"<[^>]+>", "", c)) for c in cells])
    return found


def test_freshness_lists_each_lesson_with_its_age_and_warnings(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")  # 2026-12-01 00:00 UTC
    page = rendered(root, "authors/freshness.md")
    assert rows(page, "Freshness of every lesson") == [
        ["lesson", "newest good run", "date", "GPU", "engine", "age", "needs attention"],
        [
            "1.1 A tiny cache",
            RUN,
            "20 November 2026",
            "NVIDIA H200",
            "numpy 2.3.4",
            "11 days",
            f"newer run {FAILED} failed; docs/part-1/pinned.md is pinned behind, to {OLDER}",
        ],
        [
            "1.2 A lesson still to write",
            *["—"] * 5,
            "no page yet (coming); no good run: `course run still-to-write` on a GPU machine",
        ],
    ]


def test_freshness_gives_each_steps_time_and_peak_gpu_memory(root: Path) -> None:
    page = rendered(root, "authors/freshness.md")
    assert "## 1.1 A tiny cache { #tiny-cache }" in page
    assert rows(page, "Steps of 1.1") == [
        ["step", "what it does", "needs", "status", "time", "share", "peak GPU memory"],
        ["decode", "Time decoding, short and long", "GPU", "ok", "1 min 35 s", "99\u00a0%",
         "1.50\u00a0GiB"],
        ["size", "Size the cache on paper", "GPU", "ok", "1.20 s", "1\u00a0%", "—"],
        ["all steps", "", "", "", "1 min 36 s", "", ""],
    ]  # fmt: skip


def test_run_histories_list_every_run_newest_first(root: Path) -> None:
    page = rendered(root, "authors/runs.md")
    table = rows(page, "Runs of 1.1")
    assert [r[:3] for r in table] == [
        ["run", "date", "status"],
        [FAILED, "21 November 2026", "failed"],
        [f"{RUN} (the page's)", "20 November 2026", "ok"],
        [OLDER, "19 November 2026", "ok"],
    ]
