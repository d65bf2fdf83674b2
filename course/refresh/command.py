"""`course outdated` and `course refresh`: parse the arguments, call the stages, report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..console import reports_errors, stderr, stdout


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for a script).")
@click.pass_obj
@reports_errors
def outdated(root: Path, as_json: bool) -> None:
    """Each lesson's engines, as recorded, against the newest releases on pip's package index.

    The answer is kept in .cache/releases.json with its date, for the authors' freshness page.
    Offline, one line says so and the exit status is 0.
    """
    from ..errors import IndexUnreachable
    from ..record.releases import load_releases
    from .index import configured_index
    from .outdated import as_json as rows_json
    from .outdated import check, labs, table

    index = configured_index()
    try:
        rows, kept = check(root, index, labs(root))
    except IndexUnreachable as exc:
        last = load_releases(root)
        line = f"offline: {exc}; nothing checked" + (
            f" (the last answer, of {last.checked_on}, is kept in .cache/releases.json)"
            if last
            else ""
        )
        if as_json:
            click.echo(json.dumps({"index": index.url, "offline": line}, indent=2))
        else:
            stderr.print(line, highlight=False, soft_wrap=True)
        return
    checked = load_releases(root)
    if as_json:
        click.echo(rows_json(rows, index, checked.checked if checked else ""))
        return
    stdout.print(table(rows, index))
    newer = sum(1 for r in rows if r.outdated)
    stderr.print(
        f"{newer} engine release{'s' if newer != 1 else ''} newer than recorded; kept in "
        f"{kept.relative_to(root)}",
        highlight=False,
    )


@click.command()
@click.argument("lessons", nargs=-1, metavar="[LESSON]...")
@click.option("--all", "all_lessons", is_flag=True, help="Every lesson that uses the engine.")
@click.option("--engine", "spec", required=True, metavar="NAME==VERSION|NAME==latest",
              help="The release to move to (latest: the newest on pip's index).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show the plan and its expected time, and stop.")
@click.option("--wheels-only", is_flag=True,
              help="Fetch the wheels the GPU host lacks into .whl/engines/ and print the command "
              "to run there; run nothing.")  # fmt: skip
@click.option("--report", "report_only", is_flag=True,
              help="Run nothing: compare, move the pins and write the report from the records "
              "already in build/.")  # fmt: skip
@click.option("--wheels", type=click.Path(file_okay=False, path_type=Path),
              help="Where the release's wheels go (default: .whl/engines/ for the GPU host, "
              ".cache/refresh/ for a run here).")  # fmt: skip
@click.option("--host-packages", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The GPU host's packages, as pip list --format=freeze writes them (default: "
              "scripts/gpu-host-packages.txt).")  # fmt: skip
@click.option("--on", metavar="TARGET", help="Where the steps run (only local: see --wheels-only).")
@click.option("--via", type=click.Choice(["skypilot"]), help="With --all: as SkyPilot jobs.")
@click.option("--bucket", metavar="URL", help="With --via skypilot: where jobs leave records.")
@click.option("-q", "--quiet", is_flag=True, help="Do not stream the steps' output.")
@click.pass_obj
@reports_errors
def refresh(
    root: Path, lessons: tuple[str, ...], all_lessons: bool, spec: str, dry_run: bool,
    wheels_only: bool, report_only: bool, wheels: Path | None, host_packages: Path | None,
    on: str | None, via: str | None, bucket: str | None, quiet: bool,
) -> None:  # fmt: skip
    """Move LESSONs (or --all) to an engine release: plan, run, compare, move pins, report.

    Writes build/refresh-<date>.md; exits 1 while a claim fails or a lab does not run on it.
    """
    from ..errors import RunError
    from ..run.lessons import lab_path
    from ..run.options import Options
    from .flow import fetch, finish, host_lines, resolve, run_here, wheels_folder
    from .outdated import labs
    from .plan import plan_lessons, plan_table, summary

    if all_lessons == bool(lessons):
        raise click.UsageError("give LESSON... or --all")
    if sum((dry_run, wheels_only, report_only)) > 1:
        raise click.UsageError("give one of --dry-run, --wheels-only and --report")
    if via and not all_lessons:
        raise click.UsageError("--via goes with --all")
    if on not in (None, "local"):
        raise RunError(
            f"--on {on}: `course run` installs an engine release on this machine only; for a GPU "
            "host, course refresh --wheels-only prints the command to run there"
        )
    from ..lab.load import load_lab

    chosen = labs(root) if all_lessons else [load_lab(lab_path(root, name)) for name in lessons]
    release = resolve(root, spec, chosen, stderr)
    plans = plan_lessons(root, chosen, release.name, release.version)
    if not report_only:
        stdout.print(plan_table(plans, release.name, release.version))
        stderr.print(summary(plans), highlight=False)
    if dry_run:
        stderr.print(f"Next: course refresh {' '.join(lessons) or '--all'} --engine "
                     f"{release.spec} --wheels-only (for the GPU host), or without "
                     "--dry-run to run here", highlight=False)  # fmt: skip
        return
    stopped: list[str] = []
    if not report_only and not any(p.touched for p in plans):
        stderr.print(f"Nothing to run: every step is reused on {release.spec}.")
        if wheels_only or via:
            return
    elif wheels_only or via:
        folder = wheels_folder(root, wheels, release, for_gpu_host=True)
        specs = fetch(root, release, plans, folder, True, host_packages, stderr)
        if via:
            from ..remote.fleet import run_skypilot

            sys.exit(run_skypilot(root, Options(engine=specs, quiet=quiet), stderr, bucket))
        shown = folder.relative_to(root) if folder.is_relative_to(root) else folder
        for line in host_lines(root, plans, release, specs, str(shown)):
            stdout.print(line, highlight=False, soft_wrap=True)
        return
    elif not report_only:
        folder = wheels_folder(root, wheels, release, for_gpu_host=False)
        specs = fetch(root, release, plans, folder, False, None, stderr)
        options = Options(quiet=quiet, engine=specs, wheels=folder if folder.is_dir() else None)
        stopped = run_here(root, plans, options, stderr)
    found, path = finish(root, chosen, release, stderr)
    stdout.print(str(path.relative_to(root)), highlight=False)
    sys.exit(1 if stopped or any(o.blocked or (o.new and not o.new.good) for o in found) else 0)
