"""The commands `course run | build | diff | compare | check | serve | publish | new | schema |
runs | outdated | refresh`: parse the arguments, call a stage, report errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from .console import reports_errors, stderr, stdout
from .errors import CourseError
from .lab.command import schema
from .publish.command import publish
from .refresh.command import outdated, refresh
from .runs.command import runs

if TYPE_CHECKING:
    from .run.target import Target


def find_root(start: Path) -> Path:
    """The project folder: the nearest folder at or above `start` holding `lab/` or `mkdocs.yml`."""
    for folder in [start, *start.parents]:
        if (folder / "lab").is_dir() or (folder / "mkdocs.yml").is_file():
            return folder
    return start


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="COURSE_ROOT",
    help="The project folder (default: the nearest folder above holding lab/ or mkdocs.yml).",
)
@click.version_option(package_name="course")
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Run the course's labs, record them, and build the site from the records."""
    ctx.obj = (root or find_root(Path.cwd())).resolve()


@cli.command()
@click.argument("lesson", required=False)
@click.option(
    "--only",
    "only",
    metavar="STEP",
    multiple=True,
    help="Run only this step (repeatable: these steps); reuse or skip the others.",
)
@click.option("--from", "from_step", metavar="STEP", help="Run this step and every step after it.")
@click.option(
    "--force", is_flag=True, help="Run steps even when their recorded result could be reused."
)
@click.option(
    "--dry-run", is_flag=True, help="Print what would run and what would be reused, and stop."
)
@click.option("-q", "--quiet", is_flag=True, help="Do not stream the steps' output.")
@click.option(
    "--on",
    "on",
    metavar="TARGET",
    help="Where the steps run: local (default) or ssh://[user@]host[:port].",
)
@click.option(
    "--accept-new-host-key",
    is_flag=True,
    help="With --on ssh://: trust a host key seen for the first time and add it to known_hosts.",
)
@click.option(
    "--ssh-config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="COURSE_SSH_CONFIG",
    help="An ssh_config file to use instead of ~/.ssh/config.",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="NAME[=VALUE]",
    help="Give every step this variable (without VALUE: its value here); repeatable.",
)
@click.option(
    "--setup",
    is_flag=True,
    help="First install the lab's requirements on the host (uv or pip), and record how long it "
    "took.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the newest run, which did not finish, from its first unfinished step.",
)
@click.option(
    "--engine",
    "engine",
    multiple=True,
    metavar="SPEC",
    help="Run with this engine release instead of the installed one (pip spec, repeatable), "
    "e.g. --engine transformers==5.24.0.",
)
@click.option(
    "--wheels",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="With --engine: install from this folder of wheels, offline.",
)
@click.option(
    "--all", "all_lessons", is_flag=True, help="Every lesson under lab/, one after another."
)
@click.option(
    "--via",
    type=click.Choice(["skypilot"]),
    help="With --all: each lesson as a SkyPilot managed job.",
)
@click.option(
    "--bucket",
    metavar="URL",
    help="With --via skypilot: where the jobs leave their records (s3://, gs://).",
)
@click.option(
    "--note", metavar="TEXT", help='What this run tries ("vocab 8192"), kept in run.json.'
)
@click.option(
    "--older-engine",
    is_flag=True,
    help="Run on the installed engine even where it is older than the one the lesson's newest"
    " good run used on this kind of GPU (refused otherwise).",
)
@click.pass_obj
@reports_errors
def run(
    root: Path,
    lesson: str | None,
    only: tuple[str, ...],
    from_step: str | None,
    force: bool,
    dry_run: bool,
    quiet: bool,
    on: str | None,
    accept_new_host_key: bool,
    ssh_config: Path | None,
    env: tuple[str, ...],
    setup: bool,
    resume: bool,
    engine: tuple[str, ...],
    wheels: Path | None,
    all_lessons: bool,
    via: str | None,
    bucket: str | None,
    note: str | None,
    older_engine: bool,
) -> None:
    """Run LESSON's lab (lab/LESSON/lab.yml) and record it in build/LESSON/<run-id>/."""
    from .record.models import Run
    from .remote.settings import SshSettings
    from .remote.targets import make_target
    from .run.display import plan_table
    from .run.options import Interrupted, Options, parse_env
    from .run.plan import Plan
    from .run.runner import run_lesson

    if only and from_step:
        raise click.UsageError("give --only or --from, not both")
    if all_lessons == bool(lesson):
        raise click.UsageError("give a LESSON or --all")
    if via and not all_lessons:
        raise click.UsageError("--via goes with --all")
    options = Options(
        force, only, from_step, dry_run, quiet, on=on, env=parse_env(env), setup=setup,
        resume=resume, engine=list(engine), wheels=wheels.resolve() if wheels else None,
        note=note, older_engine=older_engine,
    )  # fmt: skip
    settings = SshSettings(accept_new_host_key=accept_new_host_key, config=ssh_config)

    def targets(where: str | None) -> Target:
        return make_target(where, settings)

    try:
        if all_lessons:
            from .remote.fleet import run_all

            sys.exit(run_all(root, options, stderr, targets, via=via, bucket=bucket))
        result = run_lesson(root, lesson or "", options, stderr, targets)
    except Interrupted as exc:
        stderr.print(
            f"[bold red]interrupted ({exc}):[/] every process of the run was ended; the partial "
            "run is kept, marked failed",
            highlight=False,
        )
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
            stderr.print(
                f"[yellow]run is {result.record.status}:[/] some steps were skipped; "
                "pages keep using the newest complete run"
            )


def warn_damaged(root: Path, lessons: list[str] | None = None) -> None:
    """Say once, for each damaged record of these lessons (default: all), what it is and the
    remedy; the commands skip such runs and go on."""
    from .record.store import Store

    store = Store(root / "build")
    for lesson in store.lessons() if lessons is None else lessons:
        for damaged in store.damaged_runs(lesson):
            stderr.print(
                f"[yellow]warning:[/] {damaged.message()}", highlight=False, soft_wrap=True
            )


@cli.command()
@click.option(
    "--site-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the site (default: site/ in the project folder).",
)
@click.option(
    "--engine", type=click.Choice(["mkdocs", "zensical"]), default="mkdocs", help="What writes it."
)
@click.pass_obj
@reports_errors
def build(root: Path, site_dir: Path | None, engine: str) -> None:
    """Build the site (HTML, PDFs, zips) from the committed records into site/ (with MkDocs, or
    Zensical where it is installed: pip install zensical==0.0.73)."""
    from .site import build_site

    warn_damaged(root)
    result = build_site(root, site_dir, engine=engine)
    for warning in result.warnings:
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    stderr.print(
        f"built {result.site_dir} in {result.seconds:.1f} s "
        f"({len(result.pages)} lesson page{'s' if len(result.pages) != 1 else ''})"
    )


@cli.command()
@click.argument("lesson")
@click.argument("run_a", required=False)
@click.argument("run_b", required=False)
@click.option(
    "--markdown", "as_markdown", is_flag=True, help="Print Markdown (for a pull request)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for a script).")
@click.option("--all", "all_values", is_flag=True, help="List unchanged values too.")
@click.option(
    "--tolerance", default=5.0, show_default=True, metavar="PCT",
    help="How far a timed value recorded without its spread may move within noise (%).",
)  # fmt: skip
@click.pass_obj
@reports_errors
def diff(
    root: Path, lesson: str, run_a: str | None, run_b: str | None, as_markdown: bool,
    as_json: bool, all_values: bool, tolerance: float,
) -> None:  # fmt: skip
    """Compare two runs of LESSON (default: its two newest good runs on the card its lab asks for,
    resources.gpu): values moved beyond their spread or within noise, sizes and counts changed,
    lab inputs, claims broken.

    Exits 1 when a claim of the lesson's pages fails on the newer run.
    """
    try:
        from .diff import compare, pick_runs, render_console, render_markdown, to_json
        from .pages.choose import lab_card
        from .pages.evaluate import evaluate_pages, rules_of
    except ImportError as exc:
        raise CourseError(
            f"course diff evaluates the lesson's pages and needs the site's packages ({exc.name} "
            "is missing): pip install -e '.[site]'"
        ) from None
    from .record.store import Store

    store = Store(root / "build")
    store.lesson_dir(lesson)  # a name that is not a lesson's is refused here
    warn_damaged(root, [lesson])
    old, new = pick_runs(store, lesson, run_a, run_b, lab_card(root, lesson))
    pages = lambda run: evaluate_pages(root, lesson, run)  # noqa: E731 - one use, one line
    report = compare(old, new, pages, rules_of(root, lesson), tolerance / 100)
    if as_json:
        click.echo(to_json(report))
    elif as_markdown:
        click.echo(render_markdown(report))
    else:
        render_console(report, stdout, all_values)
    sys.exit(0 if report.all_hold else 1)


@cli.command("compare")
@click.argument("lesson")
@click.argument("run_id", metavar="RUN")
@click.option("--against", metavar="RUN", help="Another run than the one the page shows.")
@click.pass_obj
@reports_errors
def compare_cmd(root: Path, lesson: str, run_id: str, against: str | None) -> None:
    """RUN of LESSON against the page's run, across GPUs, by lab.yml's `scales:`; exit 1 when a
    value that must be exact differs."""
    from .package.expected import compare_runs

    text, status = compare_runs(root, lesson, run_id, against)
    click.echo(text, nl=False)
    sys.exit(status)


@cli.command()
@click.pass_obj
@reports_errors
def check(root: Path) -> None:
    """Check every page's values and claims against the records, without building HTML."""
    from .site import check_or_fail, pinned_behind

    warn_damaged(root)
    checked = check_or_fail(root)
    stderr.print(
        f"{checked.count} page{'s' if checked.count != 1 else ''} checked: every value is "
        "recorded and every claim holds"
    )
    for warning in checked.warnings:
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for page, pinned, newest in pinned_behind(root):
        stderr.print(
            f"[yellow]pinned behind:[/] {page} uses run {pinned}; its lesson's newest good run is "
            f"{newest} (remove `run:` from its front matter to follow it)",
            highlight=False,
            soft_wrap=True,
        )


@cli.command()
@click.option(
    "-a",
    "--dev-addr",
    default="127.0.0.1:8000",
    show_default=True,
    metavar="IP:PORT",
    help="Address to serve on.",
)
@click.pass_obj
@reports_errors
def serve(root: Path, dev_addr: str) -> None:
    """Serve the site with live preview."""
    from .site import serve_site

    serve_site(root, dev_addr)


@cli.command()
@click.argument("lesson")
@click.option("--part", type=int, help="The part it joins (default: the course's last part).")
@click.option("--title", help="The lesson's title (default: made from LESSON).")
@click.option("--part-title", metavar="TITLE", help="The title of a part new to the course.")
@click.pass_obj
@reports_errors
def new(
    root: Path, lesson: str, part: int | None, title: str | None, part_title: str | None
) -> None:
    """Start lesson LESSON: a lab, a page using every macro, its data file and a figure."""
    from .scaffold.new import new_lesson

    made = new_lesson(root, lesson, part, title, part_title)
    for path in made.files:
        stdout.print(f"wrote {path.relative_to(root)}", highlight=False)
    stdout.print(
        f"Lesson {made.placement.number}, '{made.title}': {made.outline}.\n"
        f"Next: course run {lesson} && course build (or course serve), then make it yours.",
        highlight=False,
    )


cli.add_command(publish)
cli.add_command(runs)
cli.add_command(outdated)
cli.add_command(refresh)
cli.add_command(schema)


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    cli(prog_name="course")
