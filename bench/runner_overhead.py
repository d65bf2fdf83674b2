"""What `course run` costs on top of the commands it runs.

A lab of 20 quick steps (each a Python script doing about WORK seconds of arithmetic and printing
a line) is run with `course run --force`, and the same 20 commands are run directly, one after
another, in one bash. Each is timed REPEAT times; the medians and their ratio are printed.

    .venv/bin/python bench/runner_overhead.py [--steps 20] [--work 0.2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = """\
import sys, time
t0 = time.perf_counter()
n, total = 0, 0
while time.perf_counter() - t0 < float(sys.argv[2]):
    for i in range(1000):
        total += i * i
    n += 1
print(f"step {sys.argv[1]}: {n * 1000:,} squares, total {total:,}")
"""


def make_lab(root: Path, steps: int, work: float) -> list[str]:
    lab = root / "lab" / "bench"
    lab.mkdir(parents=True)
    (lab / "step.py").write_text(STEP)
    commands = [f"{sys.executable} step.py {i} {work}" for i in range(steps)]
    # the lab names the interpreter its commands use, as a real lab does (`python:`)
    lines = ["lesson: bench", "title: Runner overhead", f"python: {sys.executable}", "steps:"]
    for i, cmd in enumerate(commands):
        lines += [
            f"  - id: s{i}",
            f"    run: {cmd}",
            "    capture:",
            "      squares: {regex: 'step \\d+: ([\\d,]+) squares', type: int}",
        ]
    (lab / "lab.yml").write_text("\n".join(lines) + "\n")
    return commands


def timed(args: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--work", type=float, default=0.2, help="seconds of work per step")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-runner-"))
    try:
        commands = make_lab(root, args.steps, args.work)
        course = [sys.executable, "-m", "course", "--root", str(root), "run", "bench", "--force"]
        direct_dir = root / "direct"
        shutil.copytree(root / "lab" / "bench", direct_dir)
        shell = ["bash", "-c", "; ".join(commands)]
        timed(course, root)  # warm the file cache
        runner, direct = [], []
        for _ in range(args.repeat):
            direct.append(timed(shell, direct_dir))
            runner.append(timed(course, root))
        r, d = statistics.median(runner), statistics.median(direct)
        print(f"{args.steps} steps of {args.work:g} s of work, median of {args.repeat}:")
        print(f"  direct, one bash:   {d:7.3f} s")
        print(f"  course run --force: {r:7.3f} s")
        print(f"  ratio:              {r / d:7.3f}")
        print(f"  overhead per step:  {(r - d) / args.steps * 1000:7.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
