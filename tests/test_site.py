"""A damaged record does not block the rest, a failed build keeps the last good site, and one
build lists every page problem, misspelt macros included."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import COURSE, LESSON, OLDER, REPO, RUN, make_project

from course.errors import PageError
from course.record.store import Store
from course.site import build_site, check_site

DAMAGED = "2026-11-21T090000Z-h200"
"""The fixture lesson's failed run, which no page uses."""


def damage(root: Path, run_id: str) -> Path:
    path = root / "build" / LESSON / run_id / "run.json"
    path.write_text(path.read_text()[:200])  # cut short, as a disk full or a bad copy leaves it
    return path.parent


def course(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COURSE, "--root", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        cwd=REPO,  # where `python -m course` finds this checkout's package
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture site with the record of an old failed run cut short, built."""
    root = make_project(tmp_path_factory.mktemp("damaged") / "project")
    damage(root, DAMAGED)
    build_site(root, root / "site")
    return root


def test_a_damaged_record_is_reported_once_and_skipped(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = Store(built / "build").damaged_runs(LESSON)[0].message()  # from elsewhere: in full
    monkeypatch.chdir(built)  # messages name folders from where the command runs
    store = Store(Path("build"))
    assert [r.run_id for r in store.runs(LESSON)] == [OLDER, RUN]
    assert store.newest_good(LESSON).run_id == RUN  # type: ignore[union-attr]
    (damaged,) = store.damaged_runs(LESSON)
    message = damaged.message()
    folder = f"build/{LESSON}/{DAMAGED}"
    assert message.startswith(f"{folder}: damaged record, skipped (run.json not valid JSON: ")
    assert "it is never counted as a good run" in message
    assert message.endswith(f"mv {folder} build/{LESSON}/.damaged-{DAMAGED}")
    for args in (["check"], ["diff", LESSON], ["run", LESSON, "--dry-run"]):
        done = course(built, *args)
        assert done.returncode == 0, (args, done.stderr)
        warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        assert warnings == [f"warning: {shown}"], args
    assert (built / "site/part-1/tiny/index.html").is_file()


def test_a_damaged_run_in_use_is_one_problem_naming_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    folder = damage(root, OLDER)  # the run pinned by docs/part-1/pinned.md
    _, problems = check_site(root)
    (problem,) = problems
    assert problem.page == "docs/part-1/pinned.md"
    assert problem.message.startswith(f"{folder}: damaged record, skipped (run.json not valid")


MISTAKES = """
{{ valeu("decode.tps_short") }} and {{ terminall("size") }}.
{{ claim("decode.tps_long > decode.tps_short", "Long decoding is faster.") }}
"""


def test_a_failed_build_keeps_the_last_good_site_and_lists_every_problem(built: Path) -> None:
    site = built / "site"
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    page = built / "docs/part-1/tiny.md"
    good = page.read_text(encoding="utf-8")
    page.write_text(good + MISTAKES, encoding="utf-8")
    try:
        with pytest.raises(PageError) as caught:
            build_site(built, site)
        _, problems = check_site(built)
    finally:
        page.write_text(good, encoding="utf-8")
    message = str(caught.value)
    assert "3 problems in 1 page:" in message
    assert (
        "  - valeu('decode.tps_short'): no macro or value named 'valeu' (did you mean " in message
    )
    assert "value()?" in message and "  - terminall('size'): no macro or value named" in message
    assert "claim('decode.tps_long > decode.tps_short')" in message
    assert {p.call for p in problems} == {
        "valeu('decode.tps_short')",
        "terminall('size')",
        "claim('decode.tps_long > decode.tps_short')",
    }
    after = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before, "a failed build changed the last good site"
    assert [p.name for p in built.iterdir() if p.name.startswith(".site.")] == []
