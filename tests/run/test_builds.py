"""`builds:` in lab.yml: a native engine built once per release from its source, kept outside the
record, recorded as a step, and a new release re-running only the steps that use it."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from support import CourseRun

from course.record.store import Store

RECIPE = """\
lesson: greeter
title: A lab with a built engine
builds:
  greet:
    package: greet-src
    version: "1.0"
    command: >-
      echo "building greet $BUILD_VERSION ($BUILD_COMMIT) for $DEVICE" &&
      mkdir -p "$PREFIX/bin" && tar -xJf "$SOURCE" -C "$PREFIX/bin" && chmod +x "$PREFIX/bin/greet"
steps:
  - id: plain
    run: echo plain step
    inputs: [lab.yml]
  - id: hello
    uses: [greet]
    run: greet
    inputs: [lab.yml]
    capture:
      said: {regex: '^(greet \\S+ says hello)$', type: str}
"""


def source(project: Path, version: str) -> None:
    """`.cache/sources/greet-VERSION.tar.xz` holding a script, and its .json naming a commit."""
    folder = project / ".cache" / "sources"
    folder.mkdir(parents=True, exist_ok=True)
    script = f"#!/bin/sh\necho 'greet {version} says hello'\n".encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        info = tarfile.TarInfo("greet")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    (folder / f"greet-{version}.tar.xz").write_bytes(buffer.getvalue())
    (folder / f"greet-{version}.json").write_text(json.dumps({"commit": f"c0ffee{version}"}))


def test_a_build_is_made_once_recorded_and_a_new_release_reruns_its_users(
    project: Path, course: CourseRun
) -> None:
    folder = project / "lab" / "greeter"
    folder.mkdir()
    (folder / "lab.yml").write_text(RECIPE)
    missing = course("run", "greeter")
    assert missing.returncode == 1
    assert "no source for greet 1.0: expected .cache/sources/greet-1.0.tar.xz" in missing.stderr
    source(project, "1.0")
    source(project, "2.0")
    first = course("run", "greeter")
    assert first.returncode == 0, first.stderr
    (run,) = [r for r in Store(project / "build").runs("greeter") if r.good]
    build = run.record.step("build-greet")
    assert build.kind == "build" and build.values["version"].value == "1.0"
    assert build.values["commit"].value == "c0ffee1.0"
    assert "building greet 1.0 (c0ffee1.0) for cpu" in run.transcript("build-greet")
    assert run.record.engine["greet"] == "1.0"
    assert run.record.step("hello").values["said"].value == "greet 1.0 says hello"
    made = project / ".cache" / "builds" / "greet-1.0-cpu"
    stamp = (made / ".complete").stat().st_mtime_ns
    # a forced re-run reuses the build, and still records it with its log
    again = course("run", "greeter", "--force")
    assert again.returncode == 0 and "reusing" in again.stderr
    assert (made / ".complete").stat().st_mtime_ns == stamp
    # a new release: only the step that uses the build runs again
    newer = course("run", "greeter", "--engine", "greet==2.0")
    assert newer.returncode == 0, newer.stderr
    latest = Store(project / "build").runs("greeter")[-1]
    assert latest.record.engine["greet"] == "2.0"
    statuses = {s.id: s.status for s in latest.record.steps}
    assert statuses == {"build-greet": "ok", "plain": "reused", "hello": "ok"}
    assert latest.record.step("hello").values["said"].value == "greet 2.0 says hello"


def test_a_run_that_reuses_every_user_of_a_build_keeps_the_builds_record(
    project: Path, course: CourseRun
) -> None:
    """`--only plain` runs no step of the engine: the build is neither made nor lost, its record
    (release, commit, time, log) comes along from the run its users are reused from."""
    folder = project / "lab" / "greeter"
    folder.mkdir()
    (folder / "lab.yml").write_text(RECIPE)
    source(project, "1.0")
    assert course("run", "greeter").returncode == 0
    first = Store(project / "build").runs("greeter")[-1]
    alone = course("run", "greeter", "--only", "plain")
    assert alone.returncode == 0, alone.stderr
    assert "building greet" not in alone.stdout + alone.stderr
    latest = Store(project / "build").runs("greeter")[-1]
    assert latest.run_id != first.run_id and latest.good
    statuses = {s.id: s.status for s in latest.record.steps}
    assert statuses == {"build-greet": "reused", "plain": "ok", "hello": "reused"}
    build = latest.record.step("build-greet")
    assert build.reused_from == first.run_id
    assert build.values["commit"].value == "c0ffee1.0"
    assert "building greet 1.0" in latest.transcript("build-greet")


CHAIN = """\
lesson: chain
title: Two steps that use one build, the second reading what the first made with it
builds:
  greet:
    package: greet-src
    version: "1.0"
    command: mkdir -p "$PREFIX/bin" && tar -xJf "$SOURCE" -C "$PREFIX/bin"
steps:
  - id: plain
    run: echo plain step
    inputs: [lab.yml]
  - id: convert
    uses: [greet]
    run: greet > made.txt
    inputs: [lab.yml]
  - id: serve
    uses: [greet]
    run: cat made.txt serve.txt
    inputs: [lab.yml, serve.txt]
    capture:
      said: {regex: '^(greet \\S+ says hello)$', type: str}
"""


def test_when_one_user_of_a_build_runs_they_all_run(project: Path, course: CourseRun) -> None:
    """A changed file of the second step re-runs the first too: the file it reads is made by the
    first, in the scratch folder, only when that one runs."""
    folder = project / "lab" / "chain"
    folder.mkdir()
    (folder / "lab.yml").write_text(CHAIN)
    (folder / "serve.txt").write_text("first\n")
    source(project, "1.0")
    assert course("run", "chain").returncode == 0
    (folder / "serve.txt").write_text("second\n")
    again = course("run", "chain")
    assert again.returncode == 0, again.stderr
    latest = Store(project / "build").runs("chain")[-1]
    statuses = {s.id: s.status for s in latest.record.steps}
    assert statuses == {"build-greet": "ok", "plain": "reused", "convert": "ok", "serve": "ok"}
    assert latest.record.step("serve").values["said"].value == "greet 1.0 says hello"
    assert "second" in latest.transcript("serve")


TALKER = """\
lesson: talker
title: A lab that needs one more program from the same build
builds:
  greet:
    package: greet-src
    version: "1.0"
    programs: [greet, talk]
    command: >-
      mkdir -p "$PREFIX/bin" && tar -xJf "$SOURCE" -C "$PREFIX/bin" &&
      printf '#!/bin/sh\\necho talk says hello\\n' > "$PREFIX/bin/talk" &&
      chmod +x "$PREFIX/bin/talk"
steps:
  - id: talk
    uses: [greet]
    run: talk && greet
    inputs: [lab.yml]
    capture:
      said: {regex: '^(talk says hello)$', type: str}
"""


def test_a_kept_build_without_a_program_the_lab_names_is_made_again(
    project: Path, course: CourseRun
) -> None:
    """Two labs build one release with different commands: the build kept by the first lacks a
    program the second names under `programs:`, so the second makes it again, and the first
    then reuses the fuller build."""
    source(project, "1.0")
    for lesson, recipe in (("greeter", RECIPE), ("talker", TALKER)):
        (project / "lab" / lesson).mkdir()
        (project / "lab" / lesson / "lab.yml").write_text(recipe)
    assert course("run", "greeter").returncode == 0
    made = project / ".cache" / "builds" / "greet-1.0-cpu"
    assert not (made / "bin" / "talk").exists()
    talker = course("run", "talker")
    assert talker.returncode == 0, talker.stderr
    assert "has no talk (another lab's command made it): making it again" in talker.stderr
    (run,) = Store(project / "build").runs("talker")
    assert run.record.step("talk").values["said"].value == "talk says hello"
    again = course("run", "greeter", "--force")
    assert again.returncode == 0 and "reusing" in again.stderr
    # a build that does not make what it names fails, naming the program and the key
    broken = TALKER.replace("lesson: talker", "lesson: broken").replace(
        "[greet, talk]", "[greet, chat]"
    )
    (project / "lab" / "broken").mkdir()
    (project / "lab" / "broken" / "lab.yml").write_text(broken)
    failed = course("run", "broken")
    assert failed.returncode == 1
    assert (
        "the build of greet 1.0 made no chat in $PREFIX/bin (builds.greet.programs" in failed.stderr
    )
