"""`course runs prune LESSON`: failed and partial runs go, unless a page pins one, a kept run
reuses its steps, or it is the newest good run; `--failed` and `--dry-run`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from support import COURSE, LESSON, OLDER, RUN, make_project

from course.record.files import dump_json

FAILED = "2026-11-21T090000Z-h200"
"""The fixture's failed run, newer than its newest good run."""
EARLY = "2026-11-18T090000Z-h200"
"""A failed run nothing needs."""
PARTIAL = "2026-11-18T100000Z-h200"
REUSED = "2026-11-17T090000Z-h200"
"""A failed run whose step 'size' the newest good run reuses."""
PINNED = "2026-11-16T090000Z-h200"
"""A failed run a page pins."""


def add_run(root: Path, run_id: str, status: str) -> None:
    """A copy of the fixture's failed run, under another id and status."""
    folder = root / "build" / LESSON
    shutil.copytree(folder / FAILED, folder / run_id)
    record = json.loads((folder / run_id / "run.json").read_text())
    record.update(run_id=run_id, status=status, started=f"{run_id[:10]}T09:00:00Z")
    (folder / run_id / "run.json").write_text(dump_json(record))


def prune(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COURSE, "--root", str(root), "runs", "prune", LESSON, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_prune_removes_only_the_runs_nothing_needs(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    for run_id, status in ((EARLY, "failed"), (PARTIAL, "partial"), (REUSED, "failed")):
        add_run(root, run_id, status)
    add_run(root, PINNED, "failed")
    newest = root / "build" / LESSON / RUN / "run.json"
    record = json.loads(newest.read_text())
    record["steps"][0].update(status="reused", reused_from=REUSED)
    newest.write_text(dump_json(record))
    page = root / "docs" / "part-1" / "pinned.md"
    page.write_text(page.read_text().replace(f"run: {OLDER}", f"run: {PINNED}"))
    runs = sorted(p.name for p in (root / "build" / LESSON).iterdir())

    dry = prune(root, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"would remove build/{LESSON}/{EARLY}: failed (failed at step 'decode')",
        f"would remove build/{LESSON}/{PARTIAL}: partial (failed at step 'decode')",
        f"would remove build/{LESSON}/{FAILED}: failed (failed at step 'decode')",
        f"kept build/{LESSON}/{PINNED}: pinned by docs/part-1/pinned.md",
        f"kept build/{LESSON}/{REUSED}: run {RUN} reuses its step 'size'",
    ]
    assert sorted(p.name for p in (root / "build" / LESSON).iterdir()) == runs

    failed = prune(root, "--failed")
    assert failed.returncode == 0, failed.stderr
    assert f"removed build/{LESSON}/{EARLY}: failed" in failed.stdout
    left = sorted(p.name for p in (root / "build" / LESSON).iterdir())
    assert left == [PINNED, REUSED, PARTIAL, OLDER, RUN]  # the good runs are never candidates

    rest = prune(root)
    assert rest.returncode == 0 and f"removed build/{LESSON}/{PARTIAL}: partial" in rest.stdout
    again = prune(root)
    assert again.stdout.splitlines()[-1] == f"nothing to remove in build/{LESSON}/"
    unknown = prune(root.parent / "nowhere")
    assert unknown.returncode == 1 and f"'{LESSON}' has no runs in" in unknown.stderr
