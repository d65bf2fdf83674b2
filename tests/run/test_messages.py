"""What the runner says when a lab asks for what cannot be: an interpreter that is not there, a
service that never answers, a kept path that is not a file; and run ids that keep time order when
many runs start in one second."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from support import CourseRun, free_port

from course.record.files import dump_json
from course.record.models import Record
from course.record.store import Store

LAB = "echo-server"


def write_lab(project: Path, head: str, steps: str) -> Path:
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(f"lesson: echo-server\ntitle: t\n{head}steps:\n{steps}")
    return path


def test_an_interpreter_that_is_not_there_is_refused_before_running(
    project: Path, course: CourseRun
) -> None:
    lab = write_lab(project, "python: python9\n", "  - id: one\n    run: echo ran\n")
    done = course("run", LAB)
    assert done.returncode == 1
    assert done.stderr == (
        f"error: refused, nothing was run: {lab}: python: 'python9' is not found on local (or "
        "does not run); name the lab's interpreter there, such as python3\n"
    )
    assert Store(project / "build").runs(LAB) == []


def test_a_service_never_ready_names_its_url_and_kept_paths_that_are_not_files(
    project: Path, course: CourseRun
) -> None:
    port = free_port()
    write_lab(
        project,
        "",
        '  - id: mute\n    start: sleep 30\n    ready: {url: "http://127.0.0.1:${PORT}/health"}\n'
        "    deadline: 1\n",
    )
    done = course("run", LAB, env={"PORT": str(port)})
    assert done.returncode == 1
    assert (
        "step 'mute' failed: the service was not ready after its deadline of 1 s (waited for GET "
        f"http://127.0.0.1:{port}/health to answer 2xx; last: ConnectError)\n"
    ) in done.stderr
    write_lab(
        project,
        "",
        "  - id: odd\n    run: mkdir out && mkfifo pipe\n    files: [out, pipe, none.txt]\n",
    )
    done = course("run", LAB)
    assert done.returncode == 1
    assert (
        "step 'odd' failed: file 'out' (listed under files) is a folder, not a file (list the "
        "files in it); file 'pipe' (listed under files) is not a regular file (a FIFO, socket or "
        "device); only files are kept; file 'none.txt' (listed under files) was not produced\n"
    ) in done.stderr


def record(run_id: str) -> str:
    return dump_json(
        Record.model_validate(
            {"lesson": LAB, "title": "t", "run_id": run_id, "status": "ok", "started": "now",
             "lab_file": "lab.yml", "host": {}, "engine": {}}
        ).model_dump(mode="json")
    )  # fmt: skip


def test_runs_of_one_second_keep_time_order_old_ids_and_new(tmp_path: Path) -> None:
    store = Store(tmp_path / "build")
    folder = store.lesson_dir(LAB)
    folder.mkdir(parents=True)
    # an older runner's ten runs of one second: -2 ... -11 (and a GPU name ending in digits)
    older = ["2026-11-29T101233Z-rtx-4090"] + [f"2026-11-29T101233Z-rtx-4090-{n}" for n in
                                                range(2, 12)]  # fmt: skip
    second = datetime(2026, 11, 29, 10, 12, 34, tzinfo=UTC)
    made = []
    for _ in range(12):  # this runner's twelve runs of the next second
        run_id = store.new_run_id(LAB, second, "rtx-4090")
        (folder / run_id).mkdir()
        made.append(run_id)
    assert made == ["2026-11-29T101234Z-rtx-4090"] + [
        f"2026-11-29T101234Z-rtx-4090-{n:02d}" for n in range(2, 13)
    ]
    assert sorted(made) == made  # plain sorting keeps their order
    shuffled = older + made
    random.Random(7).shuffle(shuffled)
    for run_id in shuffled:
        (folder / run_id).mkdir(exist_ok=True)
        (folder / run_id / "run.json").write_text(record(run_id))
    assert [r.run_id for r in store.runs(LAB)] == older + made
    newest = store.newest_good(LAB)
    assert newest is not None and newest.run_id == "2026-11-29T101234Z-rtx-4090-12"
