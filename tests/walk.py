"""A learner's walk through a lesson zip's START-HERE.md, as its blocks say, in order (imported by
the tests as `walk`, and run by itself for the slow suite):

    python tests/walk.py LESSON.zip [--fresh-venv] [--builds] [--home DIR]

`read(text)` cuts START-HERE.md into its sections and command blocks; `cpu_path(guide)` is the
commands a learner without a GPU types, in order: the CPU install lines, every step's CPU form
(a step's own command where it has none), the llama.cpp lines for the CPU, `python3 compare.py`;
`follow()` runs them in the unzipped `lab/` folder: a service in the background until its stop
step, each command with bash. The fast tests run the steps with the project's Python instead of a
fresh virtual environment (`python3` on the PATH is the project's), and leave out the steps that
need a native build; `--fresh-venv --builds` is the literal walk: a new virtual environment, the
install lines with pip, llama.cpp downloaded and built.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_BLOCK = re.compile(r"^(`{3,})bash\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)
_READY = re.compile(r"It is ready when `(http[^`]+)` answers")


@dataclass
class Section:
    """One `## ` section of START-HERE.md: its heading, its text and its bash blocks in order."""

    heading: str
    text: str
    blocks: list[str] = field(default_factory=list)

    @property
    def label(self) -> str | None:
        """'6a' for '## Step 6a: llama-gguf-06b (needs a GPU)'; None for other sections."""
        found = re.match(r"Step (\d+[a-z]*): ", self.heading)
        return found.group(1) if found else None

    @property
    def step(self) -> str | None:
        """The lab step's id of a step section."""
        found = re.match(r"Step \S+: ([a-z0-9-]+)", self.heading)
        return found.group(1) if found else None

    @property
    def needs_gpu(self) -> bool:
        return self.heading.endswith("(needs a GPU)")

    @property
    def ready(self) -> str | None:
        """The URL that answers once a service step's service is ready."""
        found = _READY.search(self.text)
        return found.group(1) if found else None

    @property
    def stops(self) -> str | None:
        """The step id whose service a stop step ends."""
        found = re.search(r"ends the service of step \S+ \(([a-z0-9-]+)\)", self.text)
        return found.group(1) if found else None


def read(text: str) -> list[Section]:
    """START-HERE.md's `## ` sections, each with its bash blocks."""
    sections = []
    for chunk in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        blocks = [m.group(2) for m in _BLOCK.finditer(body)]
        sections.append(Section(heading.strip(), body, blocks))
    return sections


@dataclass
class Command:
    """One block to type: in `section`, starting a service when `ready` is set, ending one when
    `stop` is."""

    section: str
    lines: str
    step: str | None = None
    ready: str | None = None
    stop: str | None = None
    build: bool = False
    """A block that gets a native engine (llama.cpp), or a step that runs one."""


def cpu_path(sections: list[Section]) -> list[Command]:
    """What a learner without a GPU types, in order. The steps of the page steps a "Before step
    N: get ENGINE" section names run that engine's programs (`build`)."""
    path: list[Command] = []
    engine_steps: set[str] = set()
    for s in sections:
        if s.heading == "Before you start":
            # the CPU install lines when the lab installs PyTorch, else the one install
            if s.blocks:
                path.append(Command(s.heading, s.blocks[-1]))
        elif s.heading.startswith("Before step") and " get " in s.heading:
            engine_steps |= set(re.findall(r"\d+", s.heading.split(": get ")[0]))
            download, _, *exports = s.blocks[0].split("\n")
            path.append(
                Command(s.heading, "\n".join([download, s.blocks[1], *exports]), build=True)
            )
        elif s.label is not None:
            uses = re.match(r"\d+", s.label).group(0) in engine_steps  # type: ignore[union-attr]
            if s.stops:
                path.append(Command(s.heading, "", s.step, stop=s.stops, build=uses))
            elif s.blocks:
                typed = s.blocks[1] if len(s.blocks) > 1 else s.blocks[0]
                path.append(Command(s.heading, typed, s.step, s.ready, build=uses))
        elif s.heading.startswith("Compare your numbers"):
            path.append(Command(s.heading, s.blocks[0]))
    return path


def _bash(lines: str, cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", lines],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{lines}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def _wait(url: str, service: subprocess.Popen[bytes], deadline: float) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if service.poll() is not None:
            raise AssertionError(f"the service for {url} ended with {service.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {deadline} s")


def follow(
    commands: list[Command],
    lab: Path,
    env: dict[str, str],
    skip_builds: bool = True,
    timeout: float = 1800,
) -> dict[str, str]:
    """Type the commands in order in `lab`, each with bash; what the set-up blocks set (an
    activated environment, PATH) holds for the blocks after them. Returns each step's output by
    step id (and 'compare'). A service runs in its own process group until its stop step sends it
    Ctrl-C, and is killed at the end whatever happens."""
    outputs: dict[str, str] = {}
    services: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for command in commands:
            if skip_builds and command.build:
                continue
            if command.stop:
                service = services.pop(command.stop)
                os.killpg(service.pid, signal.SIGINT)  # Ctrl-C in its terminal
                service.wait(60)
                continue
            if command.ready:
                with open(lab / f".walk-{command.step}.out", "wb") as log:
                    services[command.step or ""] = subprocess.Popen(
                        ["bash", "-c", command.lines],
                        cwd=lab,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                _wait(command.ready, services[command.step or ""], 300)
                continue
            if command.section == "Before you start" or command.build and not command.step:
                # what these blocks set (a virtual environment, PATH) holds for the next ones
                env = _exported(_bash(command.lines + "\nexport -p", lab, env, timeout), env)
                continue
            key = "compare" if command.section.startswith("Compare") else command.step or ""
            outputs[key] = _bash(command.lines, lab, env, timeout)
    finally:
        for service in services.values():
            os.killpg(service.pid, signal.SIGKILL)
            service.wait(30)
    return outputs


def compare_rows(out: str) -> list[tuple[str, str]]:
    """compare.py's table, row by row in the order of expected.json's values: (yours, verdict
    without its note), cut at the columns its heading line sets (compare_report.render)."""
    head, _, rest = out.split("\nvalue ", 1)[1].partition("\n")
    head = "value " + head
    yours = (head.index("page") + len("page"), head.index("yours") + len("yours"))
    start = head.index("verdict")
    rows = []
    for line in rest.split("\n\n", 1)[0].splitlines()[1:]:
        if len(line) <= start:  # a step's heading
            continue
        verdict = re.sub(r" \[\d+\]$", "", line[start:].strip())
        rows.append((line[yours[0] : yours[1]].strip(), verdict))
    return rows


FALSE = ("missing", "DIFFER", "older lab", "lacks", "e-0", "e+0", "Not in your results")
"""What compare.py must not print after a walk of START-HERE.md as written."""


def shrunk(commands: list[Command]) -> set[str]:
    """The steps whose typed command ran the lab's CPU mode on shrunk models (`--tiny`, or a
    server given a tiny model's file): their sizes are the small models', not the page's."""
    return {c.step for c in commands if c.step and re.search(r"--tiny\b|-tiny-", c.lines)}


def verdict_problems(
    expected: dict[str, Any], ran: set[str], out: str, tiny: set[str] = frozenset()
) -> list[str]:
    """What is untrue in compare.py's output after a walk without a GPU that ran the steps
    `ran`, those in `tiny` on shrunk models: each row's verdict against what ran, the summary's
    counts, words that cannot be."""
    needs = {s["id"]: s["needs"] for s in expected["steps"]}
    rows = compare_rows(out)
    if len(rows) != len(expected["values"]):
        return [f"{len(rows)} rows for {len(expected['values'])} values"]
    problems = []
    for value, (yours, verdict) in zip(expected["values"], rows, strict=True):
        step, kind = value["step"], value["scales"]["kind"]
        shrunk_step = needs[step] == "gpu" or step in tiny
        if step not in ran:
            allowed = {"not run", "not read"}
        elif "regex" in value:  # printed by the step, in no results file
            allowed = {"not read"} | ({"not comparable"} if shrunk_step else set())
        elif shrunk_step:
            allowed = {"not comparable"}  # the shrunk models' numbers are not the page's
        elif kind == "exact":
            allowed = {"agrees"}
        else:
            allowed = {"not judged", "not comparable"}
        if verdict not in allowed:
            problems.append(f"{value['name']}: yours {yours}, '{verdict}', not {allowed}")
    exact = [
        v
        for v in expected["values"]
        if v["step"] in ran
        and needs[v["step"]] != "gpu"
        and v["step"] not in tiny
        and v["scales"]["kind"] == "exact"
        and "regex" not in v
    ]
    said = f"Sizes and counts match the page's to the byte ({len(exact)} values)."
    if exact and said not in out:
        problems.append(f"no '{said}'")
    not_run = [v["step"] for v in expected["values"] if v["step"] not in ran and "json" in v]
    said = f"Not run yet (no results file): {', '.join(dict.fromkeys(not_run))}."
    if not_run and said not in out:
        problems.append(f"no '{said}'")
    problems += [f"says '{word}'" for word in FALSE if word in out]
    return problems


def _exported(declared: str, env: dict[str, str]) -> dict[str, str]:
    """The environment after a block, from bash's `export -p`."""
    out = dict(env)
    for line in declared.splitlines():
        found = re.match(r'declare -x ([A-Za-z_][A-Za-z0-9_]*)="(.*)"$', line)
        if found:
            out[found.group(1)] = found.group(2).replace('\\"', '"').replace("\\\\", "\\")
    return out


def main() -> int:
    """The literal walk of one lesson zip (the slow suite)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("zip", type=Path)
    parser.add_argument("--fresh-venv", action="store_true", help="install as START-HERE says")
    parser.add_argument("--builds", action="store_true", help="download and build llama.cpp too")
    parser.add_argument("--home", type=Path, help="HOME for the walk (keeps a llama.cpp build)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="course-walk-"))
    try:
        with zipfile.ZipFile(args.zip) as archive:
            archive.extractall(work)
        (top,) = [p for p in work.iterdir() if p.is_dir()]
        home = args.home or work / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
        commands = cpu_path(read((top / "START-HERE.md").read_text(encoding="utf-8")))
        if not args.fresh_venv:  # the project's Python stands for the lab's environment
            commands = [c for c in commands if c.section != "Before you start"]
            env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        started = time.monotonic()
        outputs = follow(commands, top / "lab", env, not args.builds, timeout=3600)
        print(outputs["compare"])
        expected = json.loads((top / "expected.json").read_text(encoding="utf-8"))
        ran = {c.step for c in commands if c.step and (args.builds or not c.build)}
        problems = verdict_problems(expected, ran, outputs["compare"], shrunk(commands))
        print(f"{args.zip.name}: {len(outputs)} blocks in {time.monotonic() - started:.0f} s")
        if problems:
            print("compare.py says what is not so:\n" + "\n".join(problems))
            return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
