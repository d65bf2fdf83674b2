"""`course runs prune`: parse the arguments, call `prune.prune`, say what was done."""

from __future__ import annotations

from pathlib import Path

import click

from ..console import reports_errors, stdout


@click.group()
def runs() -> None:
    """Look after the recorded runs of a lesson (build/LESSON/)."""


@runs.command("prune")
@click.argument("lesson")
@click.option("--failed", "failed_only", is_flag=True, help="Only failed runs (not partial ones).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed, and remove nothing.")
@click.pass_obj
@reports_errors
def prune_command(root: Path, lesson: str, failed_only: bool, dry_run: bool) -> None:
    """Remove LESSON's failed and partial runs that nothing needs: never the newest good run, a
    run a page pins, or a run whose steps a kept run reuses."""
    from .prune import prune

    done = prune(root, lesson, failed_only, dry_run)
    verb = "would remove" if dry_run else "removed"
    for run in done.removed:
        failure = run.record.failure
        why = f" (failed at step '{failure.step}')" if failure and failure.step else ""
        shown = f"build/{lesson}/{run.run_id}"
        stdout.print(f"{verb} {shown}: {run.record.status}{why}", highlight=False, soft_wrap=True)
    for run_id, why in done.kept.items():
        stdout.print(f"kept build/{lesson}/{run_id}: {why}", highlight=False, soft_wrap=True)
    if not done.removed:
        stdout.print(f"nothing to remove in build/{lesson}/", highlight=False, soft_wrap=True)
