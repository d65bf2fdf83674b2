"""`course run | build | diff | check | serve`: parse the arguments, call a stage, report errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from .errors import CourseError

F = TypeVar("F", bound=Callable[..., Any])

stderr = Console(stderr=True)
stdout = Console()


def find_root(start: Path) -> Path:
    """The project folder: the nearest folder at or above `start` holding `lab/` or `mkdocs.yml`."""
    for folder in [start, *start.parents]:
        if (folder / "lab").is_dir() or (folder / "mkdocs.yml").is_file():
            return folder
    return start


def reports_errors(func: F) -> F:
    """Turn the project's errors into a message and a non-zero exit, not a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CourseError as exc:
            stderr.print("[bold red]error:[/] ", end="")
            stderr.print(str(exc), markup=False, highlight=False, soft_wrap=True)
            sys.exit(1)
        except KeyboardInterrupt:
            stderr.print("[bold red]interrupted[/]")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), envvar="COURSE_ROOT",
    help="The project folder (default: the nearest folder above holding lab/ or mkdocs.yml).",
)
@click.version_option(package_name="course")
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Run the course's labs, record them, and build the site from the records."""
    ctx.obj = (root or find_root(Path.cwd())).resolve()


@cli.command()
@click.argument("lesson")
@click.option("--only", "only", metavar="STEP", help="Run only this step; reuse or skip the others.")
@click.option("--from", "from_step", metavar="STEP", help="Run this step and every step after it.")
@click.option("--force", is_flag=True, help="Run steps even when their recorded result could be reused.")
@click.option("--dry-run", is_flag=True, help="Print what would run and what would be reused, and stop.")
@click.option("-q", "--quiet", is_flag=True, help="Do not stream the steps' output.")
@click.pass_obj
@reports_errors
def run(root: Path, lesson: str, only: str | None, from_step: str | None, force: bool, dry_run: bool,
        quiet: bool) -> None:
    """Run LESSON's lab (lab/LESSON/lab.yml) and record it in build/LESSON/<run-id>/."""
    from .plan import Plan
    from .records import Run
    from .runner import Interrupted, Options, plan_table, run_lesson

    if only and from_step:
        raise click.UsageError("give --only or --from, not both")
    try:
        result = run_lesson(root, lesson, Options(force, only, from_step, dry_run, quiet), stderr)
    except Interrupted:
        stderr.print("[bold red]interrupted:[/] every process of the run was ended; the partial run is kept, marked failed")
        sys.exit(130)
    if isinstance(result, Plan):
        stdout.print(plan_table(result))
    elif isinstance(result, Run):
        where = result.folder
        try:
            where = where.relative_to(Path.cwd())
        except ValueError:
            pass
        stdout.print(str(where), highlight=False)
        if result.record.status != "ok":
            stderr.print(f"[yellow]run is {result.record.status}:[/] some steps were skipped; "
                         "pages keep using the newest complete run")


def _not_yet(name: str, issue: str) -> None:
    stderr.print(f"course {name}: not yet — it arrives with the issue '{issue}'")
    sys.exit(2)


@cli.command()
@click.pass_obj
def build(root: Path) -> None:
    """Build the site (HTML, PDFs, zips) from the committed records into site/."""
    _not_yet("build", "Pages from records")


@cli.command()
@click.argument("lesson")
@click.argument("runs", nargs=-1)
@click.pass_obj
def diff(root: Path, lesson: str, runs: tuple[str, ...]) -> None:
    """Compare two runs of LESSON: values moved, claims broken, pages touched."""
    _not_yet("diff", "After an engine release")


@cli.command()
@click.pass_obj
def check(root: Path) -> None:
    """Check every page's values and claims against the records, without building HTML."""
    _not_yet("check", "Pages from records")


@cli.command()
@click.pass_obj
def serve(root: Path) -> None:
    """Serve the site with live preview."""
    _not_yet("serve", "Pages from records")


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    cli(prog_name="course")
