"""`course refresh`: move lessons to an engine release, end to end.

plan      which steps the release touches (their hash changes), with the last records' times
wheels    what the release needs on the host, fetched here (`--wheels-only`: for the GPU host,
          with the command to run there)
run       the touched lessons through `course run --engine ... --wheels ...` (here), or as
          SkyPilot jobs
report    from the records in build/: the diff of each lesson, claims failing with page and
          line, pins moved, sentences to read again: `build/refresh-<date>.md`
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ..errors import CourseError, IndexUnreachable, RefreshError
from ..lab.load import LoadedLab
from ..pages.format import duration
from ..record.releases import load_releases
from ..remote.settings import SshSettings
from ..remote.targets import make_target
from ..run.options import Options
from ..run.runner import run_lesson
from .index import client, configured_index, newest_release
from .outdated import engines_of
from .plan import ENGINE_WHEELS, LessonPlan, gpu_host_command
from .report import Outcome, markdown, outcomes, write_report
from .wheels import Needs, carry, gpu_host, release_needs, this_host


@dataclass(frozen=True)
class Release:
    """The engine and release asked for."""

    name: str
    version: str

    @property
    def spec(self) -> str:
        """`name==version`."""
        return f"{self.name}=={self.version}"


def parse_engine(spec: str) -> tuple[str, str]:
    """`NAME==VERSION` or `NAME==latest`."""
    name, sep, version = spec.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise RefreshError(f"--engine {spec}: expected NAME==VERSION or NAME==latest")
    return name.strip(), version.strip()


def resolve(root: Path, spec: str, lessons: list[LoadedLab], console: Console) -> Release:
    """The release `--engine` names; `latest`: the newest final release on pip's index (or, the
    index out of reach, the one `course outdated` kept)."""
    name, version = parse_engine(spec)
    package = next((p for lab in lessons for n, p in engines_of(lab).items() if n == name), None)
    if package is None:
        raise RefreshError(
            f"--engine {spec}: no lesson names {name} as an engine (lab.yml engine:)"
        )
    if version != "latest":
        return Release(name, version)
    index = configured_index()
    try:
        with client(index) as http:
            newest = newest_release(http, index, package)
    except IndexUnreachable as exc:
        kept = load_releases(root)
        known = kept.engines.get(name) if kept else None
        if kept is None or known is None or known.newest is None:
            raise RefreshError(f"--engine {spec}: {exc}; name the release instead") from None
        console.print(f"{exc}; {name}==latest is {known.newest} as checked on {kept.checked_on}",
                      highlight=False)  # fmt: skip
        return Release(name, known.newest)
    if newest is None:
        raise RefreshError(f"--engine {spec}: {package} is not on the package index {index.url}")
    console.print(f"{name}==latest is {newest} on {index.url}", highlight=False)
    return Release(name, newest)


def before_release(plans: list[LessonPlan]) -> str | None:
    """The release most touched lessons recorded."""
    found = Counter(lp.before for lp in plans if lp.touched and lp.before)
    return found.most_common(1)[0][0] if found else None


def needs_for(root: Path, release: Release, plans: list[LessonPlan], for_gpu_host: bool,
              host_packages: Path | None) -> Needs:  # fmt: skip
    """What the release needs on the host: the GPU host (its package list) or this machine."""
    touched = [lp for lp in plans if lp.touched]
    if any(release.name in lp.loaded.lab.builds for lp in touched):
        return Needs()  # a build: its source travels in .cache/sources/, not as a wheel
    python = touched[0].loaded.lab.python if touched else "python3"
    host = gpu_host(root, host_packages) if for_gpu_host else this_host(python)
    return release_needs(root, release.name, release.version, before_release(plans), host)


def say_needs(needs: Needs, folder: Path, console: Console) -> None:
    """What was fetched, and why each wheel."""
    console.print(f"{len(needs.wheels)} wheels ({needs.megabytes():.1f} MB) in {folder}:")
    for wheel in needs.wheels:
        console.print(f"  {wheel.path.name}: {wheel.why}", highlight=False)
    for line in needs.assumed:
        console.print(f"  assumed met: {line}", highlight=False)


def host_lines(root: Path, plans: list[LessonPlan], release: Release, specs: list[str],
               wheels: str) -> list[str]:  # fmt: skip
    """The GPU-host command and what goes with it."""
    touched = [lp for lp in plans if lp.touched]
    lessons = " ".join(lp.lesson for lp in touched)
    lines = [
        "On the GPU host (the tree with .whl/ carried; the runner's own wheels: "
        "bash scripts/fetch-gpu-wheels.sh):",
        "  " + gpu_host_command(plans, specs or [release.spec], wheels),
        "Expected, from the last records: "
        + ", ".join(f"{lp.lesson} {duration(lp.seconds())}" for lp in touched)
        + " (each lesson stops at COURSE_RUN_LIMIT, 540 s by default)",
        "Back here, with its records:",
        f"  tar -xzf out/records.tar.gz -C build && course refresh {lessons} --engine "
        f"{release.spec} --report",
    ]
    if not (root / ".whl").is_dir() or not list((root / ".whl").glob("pydantic-*.whl")):
        lines.insert(0, "Note: .whl/ lacks the runner's wheels: bash scripts/fetch-gpu-wheels.sh")
    if any(lp.loaded.lab.builds for lp in touched):
        lines.append(
            "Lessons with builds (llama.cpp) need their source in .cache/sources/ on the host "
            "(bash scripts/fetch-llama-cpp.sh VERSION), carried with the tree."
        )
    return lines


def run_here(root: Path, plans: list[LessonPlan], options: Options, console: Console) -> list[str]:
    """Run each touched lesson through `course run`; the lessons whose run stopped."""
    stopped = []
    settings = SshSettings()
    for lp in plans:
        if not lp.touched:
            continue
        console.print(
            f"[bold]── {lp.lesson}: course run --engine {' --engine '.join(options.engine)}"
        )
        try:
            run_lesson(root, lp.lesson, options, console, lambda on: make_target(on, settings))
        except CourseError as exc:
            console.print(f"[red]{lp.lesson}:[/] {exc}", highlight=False, soft_wrap=True)
            stopped.append(lp.lesson)
    return stopped


def finish(root: Path, lessons: list[LoadedLab], release: Release,
           console: Console) -> tuple[list[Outcome], Path]:  # fmt: skip
    """Compare, move the pins, write the report; the outcomes and the report's path."""
    found = outcomes(root, lessons, release.name, release.version)
    carried = sorted({s for o in found if o.new for s in o.new.record.options.get("engine", [])})
    path = write_report(root, markdown(found, release.name, release.version, carried))
    for o in found:
        console.print(f"{o.lesson}: {o.result(release.version).replace('**', '')}", highlight=False)
        for claim, place in o.failing:
            console.print(f"  claim fails, {place or claim.page}: {claim.text}", highlight=False)
        for place in o.moved:
            console.print(f"  pin moved, {place}: {place.text}", highlight=False)
        before = o.old.record.engine.get(release.name) if o.old else None
        for place in o.prose:
            console.print(f"  names {release.name} {before}, {place}", highlight=False)
    return found, path


def wheels_folder(root: Path, given: Path | None, release: Release, for_gpu_host: bool) -> Path:
    """Where the release's wheels go."""
    if given is not None:
        return given.resolve()
    if for_gpu_host:
        return root / ENGINE_WHEELS
    return root / ".cache" / "refresh" / release.spec.replace("==", "-")


def fetch(root: Path, release: Release, plans: list[LessonPlan], folder: Path, for_gpu_host: bool,
          host_packages: Path | None, console: Console) -> list[str]:  # fmt: skip
    """Fetch what the release needs into `folder`; the `--engine` specs to run with."""
    needs = needs_for(root, release, plans, for_gpu_host, host_packages)
    if not needs.wheels:
        return [release.spec]
    carry(needs, folder)
    say_needs(needs, folder, console)
    return needs.specs
