"""Native engines built from their released source on the run's host (`builds:` in lab.yml).

A build runs once per release and GPU kind on a host and is kept outside the record, under
`.cache/builds/<name>-<version>-<gpu>/`, with its log; every later run there reuses it, unless it
lacks a program the lab names under `programs:` (two labs may build one release with different
commands, one making more programs than the other): then it is made again. Each run
still records the build as a step of kind `build` (its command, its log as the transcript, the
release, the source's commit and how long the build took), and the release goes into the run's
engine versions, so a new release re-runs the steps that `use` it and `course diff` shows it.

The source comes from the package registry's source distribution (`scripts/fetch-source.sh`
fetches and slims it here, where there is network) as `.cache/sources/<name>-<version>.tar.xz`
with a `.json` beside it naming the commit; `--wheels DIR` may hold them instead (carried to a
host without network).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunError
from ..lab.load import LoadedLab
from ..lab.schema import Build
from ..record.masking import Redactor
from ..record.models import StepRecord, Value, build_step_id
from ..record.noise import BUILD_MADE, BUILD_SECONDS
from ..record.writer import RunWriter
from .display import Display
from .plan import Plan
from .target import Host, Workspace
from .terminal import clean, tail, transcript

SOURCES = Path(".cache") / "sources"
BUILDS = Path(".cache") / "builds"
COMPLETE = ".complete"
LOG = "build.log"


@dataclass(frozen=True)
class Built:
    """A build ready to use: where its programs are and what it was made from."""

    name: str
    version: str
    prefix: Path
    commit: str | None
    seconds: float
    """How long the build took when it was made."""
    made: str
    """When it was made (ISO 8601); equal to this run's time when made now."""
    reused: bool

    @property
    def step_id(self) -> str:
        """The record's step for it (`build_step_id`)."""
        return build_step_id(self.name)


def split_engine_specs(loaded: LoadedLab, specs: list[str]) -> tuple[dict[str, str], list[str]]:
    """`--engine` specs that name a build (NAME==VERSION) and the rest (pip specs)."""
    versions, rest = {}, []
    for spec in specs:
        name, sep, version = spec.partition("==")
        if name.strip() in loaded.lab.builds:
            if not sep or not version.strip():
                raise RunError(f"--engine {spec}: name the release, e.g. {name.strip()}==0.3.36")
            versions[name.strip()] = version.strip()
        else:
            rest.append(spec)
    return versions, rest


def releases(loaded: LoadedLab, asked: dict[str, str]) -> dict[str, str]:
    """The release of every build this run uses: the one asked for, else the lab's default."""
    return {name: asked.get(name, build.version) for name, build in loaded.lab.builds.items()}


def source_archive(root: Path, name: str, version: str, wheels: Path | None) -> Path:
    """The source archive of a release, from `--wheels DIR` or `.cache/sources/`."""
    file = f"{name}-{version}.tar.xz"
    for folder in [p for p in (wheels, root / SOURCES) if p is not None]:
        if (folder / file).is_file():
            return folder / file
    raise RunError(
        f"no source for {name} {version}: expected {SOURCES / file} (fetch it where there is "
        f"network with `bash scripts/fetch-source.sh {name} {version}`, or carry it with --wheels)"
    )


def ensure(
    root: Path,
    loaded: LoadedLab,
    name: str,
    version: str,
    gpu: str,
    host: Host,
    ws: Workspace,
    env: dict[str, str],
    display: Display,
    wheels: Path | None = None,
) -> Built:
    """The build of `name` at `version` for this GPU kind: reused when complete, else made now."""
    build: Build = loaded.lab.builds[name]
    prefix = (root / BUILDS / f"{name}-{version}-{gpu}").resolve()
    if (prefix / COMPLETE).is_file():
        done = json.loads((prefix / COMPLETE).read_text(encoding="utf-8"))
        lacking = missing_programs(prefix, build)
        if not lacking:
            display.note(f"── build {name} {version}: reusing {prefix} (made {done['made']})")
            return Built(
                name, version, prefix, done.get("commit"), done["seconds"], done["made"], True
            )
        display.note(
            f"── build {name} {version}: the one kept in {prefix} has no {', '.join(lacking)}"
            " (another lab's command made it): making it again with this lab's"
        )
    source = source_archive(root, name, version, wheels).resolve()
    about = source.with_suffix("").with_suffix(".json")
    commit = (
        json.loads(about.read_text(encoding="utf-8")).get("commit") if about.is_file() else None
    )
    partial = prefix.with_name(prefix.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    device = "cpu" if gpu == "cpu" else "cuda"
    build_env = {**env, "SOURCE": str(source), "PREFIX": str(partial), "DEVICE": device}
    build_env.update({"BUILD_VERSION": version, "BUILD_COMMIT": commit or "unknown"})
    display.note(f"── build {name} {version} for {gpu} (once; later runs reuse it)", "bold cyan")
    started = time.monotonic()
    proc = host.spawn(build.command, ws.path, build_env, lambda t: display.output("build", t))
    try:
        code = proc.wait(build.timeout)
    finally:
        proc.end()
    log = transcript(build.command, proc.output)
    (partial / LOG).write_text(log, encoding="utf-8")
    if code != 0:
        lines = "\n".join(f"  | {line}" for line in tail(clean(proc.output), 20))
        status = "timed out" if code is None else f"exited with status {code}"
        raise RunError(f"{loaded.display_path()}: the build of {name} {version} {status}:\n{lines}")
    lacking = missing_programs(partial, build)
    if lacking:
        raise RunError(
            f"{loaded.display_path()}: the build of {name} {version} made no {', '.join(lacking)}"
            f" in $PREFIX/bin (builds.{name}.programs names them; its command: {build.command})"
        )
    seconds = round(time.monotonic() - started, 3)
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"seconds": seconds, "made": made, "commit": commit, "version": version}
    (partial / COMPLETE).write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(prefix, ignore_errors=True)
    partial.rename(prefix)
    return Built(name, version, prefix, commit, seconds, made, False)


def missing_programs(prefix: Path, build: Build) -> list[str]:
    """The programs `build` names that `prefix/bin` does not hold (as runnable files)."""
    return [
        p for p in build.programs
        if not ((prefix / "bin" / p).is_file() and os.access(prefix / "bin" / p, os.X_OK))
    ]  # fmt: skip


def record_step(built: Built, build: Build, writer: RunWriter, redact: Redactor) -> StepRecord:
    """The build as a step of the record: its command, its log, its release, commit and time."""
    rec = StepRecord.model_validate(
        {
            "id": built.step_id,
            "kind": "build",
            "title": f"Build {built.name} {built.version} from its released source",
            "command": build.command,
            "status": "ok",
            "seconds": 0.0 if built.reused else built.seconds,
            "hash": "",
            "hash_parts": {"definition": "", "inputs": {}, "engine": {}, "gpu": ""},
        }
    )
    log = (built.prefix / LOG).read_text(encoding="utf-8")
    rec.transcript = writer.write_transcript(built.step_id, redact(log))
    rec.values = {
        "version": Value(value=built.version, type="str", unit="none"),
        "commit": Value(value=built.commit or "unknown", type="str", unit="none"),
        BUILD_SECONDS: Value(value=built.seconds, type="float", unit="s"),
        BUILD_MADE: Value(value=built.made, type="str", unit="none"),
    }
    return rec


def carry_reused(plan: Plan, names: set[str], writer: RunWriter) -> None:
    """Record each build in `names`, which no step runs with this time, as reused from the run
    its steps are reused from: a run that reuses every step of an engine still holds the build's
    record (its release, commit and time), which the pages read beside those steps' values."""
    carried = False
    for name in sorted(names):
        users = [sp for sp in plan.steps if name in sp.step.uses]
        sources = [sp.source for sp in users if sp.action == "reuse" and sp.source is not None]
        if not sources or len(sources) < len(users):
            continue  # a step of this engine is skipped (--only): nothing of it to show
        step_id, source = build_step_id(name), sources[0]
        old = next((s for s in source.record.steps if s.id == step_id), None)
        if old is None:
            continue  # an older record, from before builds were steps
        writer.copy_step(source, step_id)
        writer.record.steps.append(old.reused(source.run_id))
        carried = True
    if carried:
        writer.save()


def step_env(built: list[Built], base: dict[str, str]) -> dict[str, str]:
    """What the steps get: each build's programs first on PATH, and NAME_DIR (LLAMA_CPP_DIR)."""
    if not built:
        return {}
    bins = [str(b.prefix / "bin") for b in built]
    env = {"PATH": os.pathsep.join([*bins, base.get("PATH", os.defpath)])}
    for b in built:
        env[b.name.replace(".", "_").replace("-", "_").upper() + "_DIR"] = str(b.prefix)
    return env
