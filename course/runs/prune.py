"""`course runs prune LESSON`: remove the runs a lesson under development left behind.

A run is removed only when nothing needs it. Candidates are the runs pages never show: failed
ones, and partial ones (`--only`, `--from`) unless `--failed` narrows it to failed ones. Kept
whatever their status:

- the lesson's newest good run (its pages show it);
- a run a page pins (`run:` in its front matter);
- a run that a kept run's reused steps come from (`reused_from`), so every kept run still
  names a run that exists.

The lesson's lock is held while runs are removed, so a run in progress, which may be reusing
steps of a failed run, is never cut short.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RecordError
from ..pages.lessons import scan
from ..record.models import Run
from ..record.store import Store
from ..run.lock import lesson_lock


@dataclass
class Pruning:
    """What `prune` removes (or would) and why it keeps each other candidate."""

    removed: list[Run] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    """Run id -> why a candidate is kept."""


def pins(root: Path, lesson: str) -> dict[str, str]:
    """Run id -> the page that pins it, for the pages of `lesson` that pin a run."""
    docs = root / "docs"
    if not docs.is_dir():
        return {}
    return {
        e.meta.run: f"docs/{e.src}" for e in scan(docs) if e.meta.lesson == lesson and e.meta.run
    }


def choose(runs: list[Run], pinned: dict[str, str], failed_only: bool) -> Pruning:
    """Which runs go (oldest first) and why each other candidate stays; nothing is removed."""
    wanted = ("failed",) if failed_only else ("failed", "partial")
    good = [r for r in runs if r.good]
    why = {r.run_id: f"pinned by {pinned[r.run_id]}" for r in runs if r.run_id in pinned}
    if good:
        why[good[-1].run_id] = "the newest good run"
    going = {r.run_id for r in runs if r.record.status in wanted and r.run_id not in why}
    changed = True
    while changed:  # a run that stays keeps the runs its reused steps come from
        changed = False
        for run in runs:
            if run.run_id in going:
                continue
            for step in run.record.steps:
                source = step.reused_from
                if step.status == "reused" and source in going:
                    going.discard(source)
                    why[source] = f"run {run.run_id} reuses its step '{step.id}'"
                    changed = True
    done = Pruning(removed=[r for r in runs if r.run_id in going])
    done.kept = {
        r.run_id: why[r.run_id] for r in runs if r.record.status in wanted and r.run_id in why
    }
    return done


def prune(root: Path, lesson: str, failed_only: bool = False, dry_run: bool = False) -> Pruning:
    """Remove the lesson's runs nothing needs (see the module's rule), unless `dry_run`."""
    store = Store(root / "build")
    if not store.lesson_dir(lesson).is_dir():
        known = ", ".join(store.lessons()) or "none"
        raise RecordError(f"'{lesson}' has no runs in {store.build} (lessons with runs: {known})")
    if dry_run:
        return choose(store.runs(lesson), pins(root, lesson), failed_only)
    with lesson_lock(store, lesson):
        done = choose(store.runs(lesson), pins(root, lesson), failed_only)
        for run in done.removed:
            shutil.rmtree(run.folder)
    return done
