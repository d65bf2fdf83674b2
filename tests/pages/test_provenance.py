"""`provenance()`: the sentence on how a page's outputs were made says which steps the run took
over from earlier runs, and when those were measured, by the page's own step numbers."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from support import LESSON, OLDER, RUN, make_project

from course.pages.history import named_steps
from course.pages.lessons import PageEntry, read_meta
from course.pages.render import render_page

PAGE = "part-1/tiny.md"


def provenance(root: Path) -> str:
    meta, raw, _ = read_meta(root / "docs" / PAGE, f"docs/{PAGE}")
    done = render_page(root, PageEntry(PAGE, meta, raw))
    assert done.context.problems == [] and done.markdown is not None
    span = re.search(r'<span class="course-provenance".*?</span>', done.markdown, re.S)
    assert span is not None
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", span.group(0))).split())


def reuse(root: Path, steps: dict[str, str]) -> None:
    """Mark the page run's steps as taken over from the runs given."""
    path = root / "build" / LESSON / RUN / "run.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    for step in record["steps"]:
        if step["id"] in steps:
            step["status"], step["reused_from"] = "reused", steps[step["id"]]
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def test_a_run_whose_steps_all_ran_says_nothing_of_earlier_runs(root: Path) -> None:
    said = provenance(root)
    assert said.startswith("The outputs on this page come from one run of this lesson's lab on")
    assert "earlier run" not in said


def test_steps_taken_over_are_named_with_the_day_they_were_measured(root: Path) -> None:
    reuse(root, {"size": OLDER})
    said = provenance(root)
    assert said.endswith(
        f"run {RUN}. Step 1 was measured in an earlier run, on 19 November 2026 ({OLDER}), on "
        "the same kind of GPU with the same files and versions: this run took them over."
    ), said
    # a run since pruned still has a day: its id's
    reuse(root, {"size": "2026-11-01T000000Z-h200", "decode": OLDER})
    said = provenance(root)
    assert (
        "Step 1 was measured in an earlier run, on 1 November 2026 (2026-11-01T000000Z-h200); "
        f"step 2 was measured in an earlier run, on 19 November 2026 ({OLDER})"
    ) in said, said


def test_steps_are_named_by_the_pages_numbers_ranges_and_letters() -> None:
    labels = {"build": "1a", "size": "1b", "gpu": "2", "reuse": "3", "speed": "4", "budget": "5",
              "gguf": "6a", "gguf-8b": "6b", "server": "6c"}  # fmt: skip
    assert named_steps(labels, ["build", "size", "gpu", "reuse", "speed", "budget"]) == (
        "Steps 1 to 5"
    )
    assert named_steps(labels, ["gguf", "gguf-8b", "server"]) == "Step 6"
    assert named_steps(labels, ["size", "gpu"]) == "Steps 1b and 2"  # not all of step 1
    assert named_steps(labels, ["gpu", "speed", "gguf-8b"]) == "Steps 2, 4 and 6b"
    assert named_steps(labels, ["gpu", "reuse"]) == "Steps 2 and 3"
