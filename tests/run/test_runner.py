"""`course run` on real processes: the record it writes, failures, secrets, reuse and atomicity."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import COURSE, CourseRun, free_port

from course.pages.history import runs_table
from course.record.store import Store
from course.run.process import group_members

LAB = "echo-server"


def runs_of(project: Path) -> list[str]:
    return [r.run_id for r in Store(project / "build").runs(LAB)]


def add_step(project: Path, text: str, lesson: str = LAB) -> None:
    path = project / "lab" / lesson / "lab.yml"
    path.write_text(path.read_text() + "\n" + text)


def assert_groups_gone(pgids: list[int]) -> None:
    assert pgids, "the steps should have written their process-group ids"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(group_members(g) for g in pgids):
        time.sleep(0.05)
    left = {g: group_members(g) for g in pgids if group_members(g)}
    assert not left, f"processes of the run survived: {left}"


def pgids_in(folder: Path) -> list[int]:
    return [int(p.read_text().split()[0]) for p in sorted(folder.glob("*.pgid"))]


def test_run_records_values_transcripts_and_files(project: Path, course: CourseRun) -> None:
    done = course("run", LAB)
    assert done.returncode == 0, done.stderr
    (run_id,) = runs_of(project)
    assert run_id.endswith("-cpu") and done.stdout.strip().endswith(run_id)
    folder = project / "build" / LAB / run_id
    record = json.loads((folder / "run.json").read_text())
    assert record["status"] == "ok" and record["lesson"] == LAB and record["run_id"] == run_id
    assert record["engine"]["pyyaml"]  # the version the lab's Python sees
    assert record["host"]["gpu"] is None and record["host"]["python"] and record["host"]["os"]
    assert [s["id"] for s in record["steps"]] == [
        "prepare",
        "server",
        "query",
        "stop-server",
        "words",
    ]
    query = record["steps"][2]
    assert query["exit_code"] == 0 and query["seconds"] > 0
    assert query["values"] == {
        "sum": {"value": 46209690, "type": "int", "unit": "none"},  # "46,209,690" in the output
        "count": {"value": 3, "type": "int", "unit": "none"},  # from results/client.json
        "first": {"value": 12.0, "type": "float", "unit": "ms"},  # a nested key path
    }
    (kept,) = query["files"]
    assert kept["path"] == "results/client.json"
    assert kept["bytes"] == (folder / "files/query/results/client.json").stat().st_size
    assert len(kept["sha256"]) == 64
    assert record["steps"][0]["values"]["largest"]["value"] == 6789
    # the transcript: the prompt and command, then stdout and stderr in the order written
    text = (folder / "steps/query.txt").read_text()
    assert text.startswith("lab $ python3 client.py $(cat numbers.txt)\n")
    assert (
        text.index("sum of squares")
        < text.index("a warning on stderr")
        < text.index("back on stdout")
    )
    assert "\r" not in text and "\x1b" not in text
    # a service's transcript is its log, and its captures are taken when it stops
    server = record["steps"][1]
    assert server["values"]["first_line"]["value"].startswith("listening on 127.0.0.1:")
    assert "GET /square?n=6789" in (folder / "steps/server.txt").read_text()
    # the live stream went to stderr, with the progress of each step
    assert "step 3 of 5: query" in done.stderr and "6,789 squared is" in done.stderr


def test_ansi_colour_and_carriage_returns_are_cleaned(project: Path, course: CourseRun) -> None:
    add_step(
        project,
        """\
  - id: colour
    run: printf '\\033[1;31mred\\033[0m and plain\\n'; printf 'progress 10%%\\rprogress 100%%\\n'
""",
    )
    assert course("run", LAB, "--only", "colour").returncode == 0
    (run_id,) = runs_of(project)
    text = (project / "build" / LAB / run_id / "steps/colour.txt").read_text()
    assert text.splitlines()[1:] == ["red and plain", "progress 100%"]


def test_nonzero_exit_stops_the_run_loudly(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    add_step(
        project,
        f"""\
  - id: broken
    run: echo $$ > {tmp_path}/broken.pgid; sleep 60 & for i in $(seq 1 30); do echo line $i; done; exit 3
""",  # noqa: E501 - a recipe line as a learner types it
    )
    done = course("run", LAB)
    assert done.returncode == 1
    message = done.stderr
    assert (
        "lab/echo-server/lab.yml: step 'broken' failed: the command exited with status 3" in message
    )
    assert (
        "last 20 lines of its output:" in message
        and "| line 30" in message
        and "| line 10" not in message
    )
    assert_groups_gone(pgids_in(tmp_path))  # the backgrounded sleep went with its group
    (run_id,) = runs_of(project)
    record = Store(project / "build").get(LAB, run_id).record
    assert record.status == "failed" and record.failure and record.failure.step == "broken"
    assert record.step("query").status == "ok" and record.step("broken").exit_code == 3
    assert record.step("broken").error is not None
    assert record.step("broken").error.startswith("the command exited with status 3 (expected 0)")
    assert record.step("broken").seconds is not None and record.step("broken").seconds > 0
    assert Store(project / "build").newest_good(LAB) is None


def test_timeout_ends_the_whole_process_group(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    add_step(
        project,
        f"""\
  - id: slow
    run: echo $$ > {tmp_path}/slow.pgid; (sleep 60; echo never) & echo started; sleep 60
    timeout: 1
""",
    )
    t0 = time.monotonic()
    done = course("run", LAB)
    assert done.returncode == 1 and time.monotonic() - t0 < 30
    assert "step 'slow' failed: timed out after 1 s (timeout: 1 s)" in done.stderr
    assert "| started" in done.stderr
    assert_groups_gone(pgids_in(tmp_path))
    (run_id,) = runs_of(project)
    record = Store(project / "build").get(LAB, run_id).record
    assert record.step("slow").error == "timed out after 1 s (timeout: 1 s)"


def test_service_that_never_gets_ready(project: Path, course: CourseRun, tmp_path: Path) -> None:
    port = free_port()
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(f"""\
lesson: {LAB}
title: never ready
steps:
  - id: mute
    start: echo $$ > {tmp_path}/mute.pgid; echo waiting; sleep 60
    ready: {{url: "http://127.0.0.1:{port}/health"}}
    deadline: 1.5
""")
    done = course("run", LAB)
    assert done.returncode == 1
    assert (
        f"step 'mute' failed: the service was not ready after its deadline of 1.5 s "
        f"(waited for GET http://127.0.0.1:{port}/health to answer 2xx; last: ConnectError)"
    ) in done.stderr
    assert "| waiting" in done.stderr
    assert_groups_gone(pgids_in(tmp_path))


def test_service_that_dies(project: Path, course: CourseRun, tmp_path: Path) -> None:
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(f"""\
lesson: {LAB}
title: dies
steps:
  - id: flaky
    start: echo $$ > {tmp_path}/flaky.pgid; echo ready now; sleep 0.5; echo going down; exit 4
    ready: {{log: "^ready now"}}
  - id: waits
    run: echo $$ > {tmp_path}/waits.pgid; sleep 30
  - id: early
    start: exit 2
    ready: {{log: "never"}}
""")
    done = course("run", LAB)
    assert done.returncode == 1
    assert (
        "step 'flaky' failed: the service died (exit status 4) while step 'waits' ran"
        in done.stderr
    )
    assert "| going down" in done.stderr
    assert_groups_gone(pgids_in(tmp_path))
    # the service's own record says why it failed; the step it took down says what happened
    record = Store(project / "build").get(LAB, runs_of(project)[0]).record
    died = "the service died (exit status 4) while step 'waits' ran; it should keep running"
    assert record.step("flaky").status == "failed"
    assert (record.step("flaky").error or "").startswith(died)
    assert (record.step("waits").error or "").startswith(
        f"ended because step 'flaky' failed: {died}"
    )
    lab.write_text(lab.read_text().replace("sleep 0.5; echo going down; exit 4", "sleep 60"))
    lab.write_text(lab.read_text().replace("sleep 30", "true"))
    done = course("run", LAB)
    assert (
        "step 'early' failed: the service exited with status 2 before it was ready "
        "(waiting for a line matching 'never')" in done.stderr
    )
    assert_groups_gone(pgids_in(tmp_path))


def test_capture_that_matches_nothing(project: Path, course: CourseRun) -> None:
    add_step(
        project,
        """\
  - id: quiet
    run: echo 'nothing to see'
    files: [missing.txt]
    capture:
      speed: {regex: 'speed: ([\\d.]+) tok/s', unit: tok/s}
      size: {json: results/client.json, key: by.second, type: int}
""",
    )
    done = course("run", LAB)
    assert done.returncode == 1
    err = done.stderr
    assert (
        "step 'quiet' failed: capture 'speed': the pattern 'speed: ([\\\\d.]+) tok/s' matched "
        "nothing" in err
    )
    assert "capture 'size': 'results/client.json' has no key 'by.second'" in err
    assert "file 'missing.txt' (listed under files) was not produced" in err
    assert "| nothing to see" in err
    record = Store(project / "build").get(LAB, runs_of(project)[0]).record
    assert (record.step("quiet").error or "").startswith("capture 'speed': the pattern")


def test_secrets_never_reach_the_record(project: Path, course: CourseRun) -> None:
    secret = "s3cr3t-Value-42"
    add_step(
        project,
        """\
  - id: leaky
    run: |
      echo "token is $HF_TOKEN"; echo "password=$DB_PASSWORD" >&2; echo "{\\"t\\": \\"$HF_TOKEN\\"}" > leak.json
    env: {DB_PASSWORD: hunter2-local}
    files: [leak.json]
    capture:
      token: {regex: 'token is (\\S+)', type: str}
      from_json: {json: leak.json, key: t, type: str}
""",  # noqa: E501 - a recipe line as a learner types it
    )
    done = course("run", LAB, "--only", "leaky", env={"HF_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    (run_id,) = runs_of(project)
    folder = project / "build" / LAB / run_id
    everything = "".join(p.read_text() for p in folder.rglob("*") if p.is_file())
    assert '"t": "***"' in (folder / "files/leaky/leak.json").read_text()
    assert secret not in everything and "hunter2-local" not in everything
    assert secret not in done.stderr + done.stdout
    record = Store(project / "build").get(LAB, run_id).record
    assert record.step("leaky").values["token"].value == "***"
    assert record.step("leaky").values["from_json"].value == "***"
    assert "token is ***" in (folder / "steps/leaky.txt").read_text()
    assert "password=***" in (folder / "steps/leaky.txt").read_text()


def test_second_run_executes_nothing_and_one_changed_file_reruns_its_steps(
    project: Path, course: CourseRun
) -> None:
    assert course("run", LAB).returncode == 0
    again = course("run", LAB)
    assert again.returncode == 0 and "Nothing to do" in again.stderr
    assert len(runs_of(project)) == 1
    # words.py feeds only the step 'words'
    words = project / "lab" / LAB / "words.py"
    words.write_text(words.read_text() + "# changed\n")
    plan = course("run", LAB, "--dry-run")
    assert plan.returncode == 0 and len(runs_of(project)) == 1
    assert "changed: words.py" in plan.stdout
    done = course("run", LAB, "--note", "longer words")
    assert done.returncode == 0, done.stderr
    first, second = runs_of(project)
    record = Store(project / "build").get(LAB, second).record
    assert record.note == "longer words"  # and in the run histories and course diff:
    history = runs_table(Store(project / "build").runs(LAB), None, {}, authors=True)
    assert "<td>longer words</td><td>words.py</td>" in history
    assert "<td>—</td><td>first run</td>" in history
    diff = course("diff", LAB)
    assert diff.returncode == 0, diff.stderr
    assert diff.stdout.splitlines()[:2] == [
        f"{LAB}: {first} → {second}",
        'note: — → "longer words"',
    ]
    statuses = {s.id: s.status for s in record.steps}
    assert statuses == {
        "prepare": "reused",
        "server": "reused",
        "query": "reused",
        "stop-server": "reused",
        "words": "ok",
    }
    assert record.step("query").reused_from == first
    assert record.step("query").values["sum"].value == 46209690
    assert (project / "build" / LAB / second / "files/query/results/client.json").is_file()
    assert (project / "build" / LAB / second / "steps/query.txt").read_text().startswith("lab $ ")
    # a file read inside a service's life re-runs the whole service
    client = project / "lab" / LAB / "client.py"
    client.write_text(client.read_text() + "# changed\n")
    assert course("run", LAB).returncode == 0
    record = Store(project / "build").get(LAB, runs_of(project)[-1]).record
    assert {s.id: s.status for s in record.steps} == {
        "prepare": "reused",
        "server": "ok",
        "query": "ok",
        "stop-server": "ok",
        "words": "reused",
    }
    # --force runs everything again
    assert course("run", LAB, "--force").returncode == 0
    record = Store(project / "build").get(LAB, runs_of(project)[-1]).record
    assert all(s.status == "ok" for s in record.steps)


def test_only_and_from(project: Path, course: CourseRun) -> None:
    done = course("run", LAB, "--only", "words")
    assert done.returncode == 0, done.stderr
    (run_id,) = runs_of(project)
    record = Store(project / "build").get(LAB, run_id).record
    assert record.status == "partial"  # pages never use it
    assert {s.id: s.status for s in record.steps}["words"] == "ok"
    assert {s.status for s in record.steps if s.id != "words"} == {"skipped"}
    assert Store(project / "build").newest_good(LAB) is None
    # --from a step inside a service's life starts the service too
    plan = course("run", LAB, "--from", "query", "--dry-run").stdout
    rows = {line.split("│")[2].strip(): line for line in plan.splitlines() if line.count("│") > 5}
    assert "run" in rows["server"] and "service 'server' runs again" in rows["server"]
    assert "skip" in rows["prepare"] and "--from query" in rows["words"]
    bad = course("run", LAB, "--only", "nope")
    assert bad.returncode == 1 and "--only nope: no such step (steps: prepare, server" in bad.stderr
    # --only repeated: those steps run, the rest is reused where it can be, skipped otherwise
    both = course("run", LAB, "--only", "prepare", "--only", "words")
    assert both.returncode == 0, both.stderr
    record = Store(project / "build").get(LAB, runs_of(project)[-1]).record
    statuses = {s.id: s.status for s in record.steps}
    assert statuses["prepare"] == "ok" and statuses["words"] == "ok"
    assert {statuses[s] for s in ("server", "query", "stop-server")} == {"skipped"}
    assert record.options["only"] == ["prepare", "words"]
    again = course("run", LAB, "--only", "prepare", "--only", "words", "--only", "nah")
    assert again.returncode == 1 and "--only nah: no such step" in again.stderr


def test_gpu_steps_refuse_to_start_without_a_gpu(project: Path, course: CourseRun) -> None:
    add_step(
        project,
        """\
  - id: on-gpu
    needs: gpu
    run: nvidia-smi
""",
    )
    done = course("run", LAB, "--setup")  # refused before anything, the set-up included
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert said.startswith(f"error: refused, nothing was run: {project}/lab/echo-server/lab.yml: ")
    assert said.endswith(
        "lab.yml: step on-gpu needs a GPU and "
        "this host has none (nvidia-smi finds no GPU). Run on a GPU host: course run echo-server "
        "--on ssh://user@host:port; or run a step that needs no GPU here with --only (prepare, "
        "server, query, words), e.g. course run echo-server --only prepare"
    ), said
    assert "installing" not in said
    assert runs_of(project) == []  # nothing ran, nothing recorded
    plan = course("run", LAB, "--dry-run")
    assert plan.returncode == 0 and "note: a run here would be refused: " in plan.stderr
    assert course("run", LAB, "--only", "words").returncode == 0


def test_ctrl_c_ends_every_process_and_keeps_the_partial_run(project: Path, tmp_path: Path) -> None:
    add_step(
        project,
        f"""\
  - id: long
    run: echo $$ > {tmp_path}/long.pgid; sleep 120 & sleep 120
""",
    )
    env = {**os.environ, "PORT": str(free_port())}
    proc = subprocess.Popen(
        [*COURSE, "--root", str(project), "run", LAB],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("long.pgid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert_groups_gone(pgids_in(tmp_path))
    (run_id,) = runs_of(project)
    record = Store(project / "build").get(LAB, run_id).record
    assert record.status == "failed" and record.failure and "interrupted" in record.failure.message
    assert record.step("words").status == "ok" and record.step("long").status == "failed"
    assert record.step("long").error == "interrupted (SIGINT: Ctrl-C) while the step ran"


def test_a_killed_run_leaves_the_good_run_selectable(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    assert course("run", LAB).returncode == 0
    (good,) = runs_of(project)
    add_step(
        project,
        f"""\
  - id: long
    run: echo $$ > {tmp_path}/long.pgid; sleep 120
""",
    )
    env = {**os.environ, "PORT": str(free_port())}
    proc = subprocess.Popen(
        [*COURSE, "--root", str(project), "run", LAB],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("long.pgid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # SIGKILL: the runner gets no chance to clean up
    proc.wait()
    for pgid in pgids_in(tmp_path):  # what it left running is ours to end
        os.killpg(pgid, signal.SIGKILL)
    store = Store(project / "build")
    assert runs_of(project) == [good]
    assert store.newest_good(LAB).run_id == good  # type: ignore[union-attr]
    leftovers = list((project / "build" / LAB).glob(".tmp-*"))
    assert len(leftovers) == 1
    # the next run turns the leftover into a failed run, keeping what it recorded
    (tmp_path / "long.pgid").unlink()
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(lab.read_text().replace("sleep 120", "true"))
    assert course("run", LAB).returncode == 0
    ids = runs_of(project)
    assert len(ids) == 3 and ids[0] == good
    killed = store.get(LAB, ids[1]).record
    assert killed.status == "failed" and "killed" in killed.failure.message  # type: ignore[union-attr]
    assert killed.step("words").status == "reused"
    assert store.newest_good(LAB).run_id == ids[2]  # type: ignore[union-attr]


def test_unknown_lesson_names_the_missing_file(course: CourseRun) -> None:
    done = course("run", "no-such-lesson")
    assert done.returncode == 1
    assert "lab/no-such-lesson/lab.yml" in done.stderr and "no such file" in done.stderr


@pytest.mark.parametrize("command", ["build", "diff", "compare", "check", "serve", "runs"])
def test_help_lists_every_command(command: str) -> None:
    done = subprocess.run([*COURSE, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and f"  {command} " in done.stdout
