"""A step that prints a lot: a 2 MB line without a newline and 30,000 lines, in a real run. The
transcript keeps its start and its end and says what it left out; the console shows a capped
part; neither costs more than linear time."""

from __future__ import annotations

from pathlib import Path

from support import CourseRun

from course.record.store import Store

KEEP_HEAD, KEEP_TAIL = 500_000, 1_500_000  # course.run.process: what a transcript keeps

LAB = "echo-server"
LINES = 30_000
WIDE = 2_000_000

LOUD = f"""\
lesson: echo-server
title: A step that prints a lot
steps:
  - id: loud
    run: python3 -c "import sys, time; sys.stdout.write('x' * {WIDE}); print(flush=True); time.sleep(0.5); [print('line', i) for i in range({LINES})]"
    timeout: 60
"""  # noqa: E501


def test_a_loud_step_is_kept_capped_and_shown_capped(project: Path, course: CourseRun) -> None:
    (project / "lab" / LAB / "lab.yml").write_text(LOUD)
    done = course("run", LAB)
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = Store(project / "build").runs(LAB)
    text = run.transcript("loud")
    full = "x" * WIDE + "\n" + "".join(f"line {i}\n" for i in range(LINES))
    end = full[-KEEP_TAIL:]
    cut = end.find("\n", 0, 4096)  # the end kept starts with a whole line, when one starts soon
    end = end[cut + 1 :] if cut >= 0 else end
    dropped = len(full) - KEEP_HEAD - len(end)
    dropped_lines = full[KEEP_HEAD : -len(end)].count("\n")
    note = (
        f"[... {dropped:,} characters ({dropped_lines:,} lines) of output not kept here: a "
        "transcript keeps the first 500,000 and the last 1,500,000 characters ...]"
    )
    command = run.record.step("loud").command
    assert text == f"lab $ {command}\n{full[:KEEP_HEAD]}\n{note}\n{end}"
    # the console: the wide line cut once, most of the lines left out, and it says so
    shown = done.stderr
    assert f"{'x' * 2000} [... {WIDE - 2000:,} more characters]\n" in shown
    assert "lines not shown here ...]" in shown
    assert f"line {LINES - 1}\n" in shown
    assert len(shown) < 200_000
