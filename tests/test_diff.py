"""After an engine release: `course diff` of two runs, the pinned-page report, the run history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import FIXTURES
from support import course_at as course

from course.record.files import dump_json
from course.record.store import Store

LESSON = "tiny-cache"
OLD, NEW = "2026-11-20T090000Z-h200", "2026-11-22T090000Z-h200"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture site plus a newer run made on a new engine release, where one number moved a
    lot.
    """
    root = tmp_path_factory.mktemp("release") / "site"
    shutil.copytree(FIXTURES / "site", root)
    old = root / "build" / LESSON / OLD
    new = root / "build" / LESSON / NEW
    shutil.copytree(old, new)
    record = json.loads((old / "run.json").read_text())
    record["run_id"] = NEW
    record["started"] = "2026-11-22T09:00:00Z"
    record["engine"] = {"numpy": "2.4.0"}
    values = {s["id"]: s["values"] for s in record["steps"]}
    values["decode"]["tps_long"]["value"] = 150.0  # -25.6 %: breaks two claims
    values["decode"]["tps_short"]["value"] = 330.0  # +5.6 %
    (new / "run.json").write_text(dump_json(record))
    page = root / "docs" / "part-1" / "tiny.md"
    page.write_text(
        page.read_text()
        + '\n## Run history\n\n{{ run_history(["decode.tps_short", "decode.tps_long"]) }}\n'
    )
    return root


STATES = ("FAILS", "holds")


def test_diff_of_the_two_newest_good_runs(release: Path) -> None:
    done = course(release, "diff", LESSON)
    assert done.returncode == 1, done.stderr  # a claim that held fails now
    out = done.stdout
    assert f"{LESSON}: {OLD} → {NEW}" in out
    assert "numpy" in out and "2.3.4" in out and "2.4.0" in out
    # values: the most moved first
    assert out.index("decode.tps_long") < out.index("decode.tps_short")
    assert "decode.ms_long" not in out  # unchanged values are left out unless --all
    assert "-28.6 %" not in out and "-25.6 %" in out and "+5.6 %" in out
    assert (
        "2 values moved beyond their spread, 0 within noise, 0 sizes or counts changed, 6 "
        "unchanged (2 with no spread recorded, judged by a 5 % tolerance)" in out
    )
    # claims: those that held before and fail now come first, each with its page and line
    rows = [line for line in out[out.index("Claims") :].splitlines() if line[2:7] in STATES]
    assert [row[2:7] for row in rows] == ["FAILS", "FAILS", "holds", "holds", "holds"]
    assert "│ FAILS       │ docs/part-1/tiny.md:26" in rows[0]
    assert "3 of 5 claims hold" in out
    assert "check docs/part-1/tiny.md#slower: revealed answer 1.55 × → 2.20 ×" in out


def test_diff_json_and_markdown(release: Path) -> None:
    data = json.loads(course(release, "diff", LESSON, "--json").stdout)
    assert (data["old"], data["new"], data["all_claims_hold"]) == (OLD, NEW, False)
    moved = [(v["name"], v["class"], v["no_spread"]) for v in data["values"] if v["differs"]]
    assert moved == [("decode.tps_long", "moved", True), ("decode.tps_short", "moved", True)]
    assert data["counts"] == {
        "moved": 2, "noise": 0, "changed": 0, "chance": 0, "added": 0, "removed": 0,
        "unchanged": 6,
    }  # fmt: skip
    assert data["values"][0]["relative"] == pytest.approx(150 / 201.7 - 1)
    broken = [c for c in data["claims"] if c["broken"]]
    assert {c["text"] for c in broken} == {
        "Long decoding runs at about 200 tokens a second.",
        "Short is 1.5 to 1.6 times as fast.",
    }
    assert broken[0]["values_now"]["decode.tps_long"] == "150 tok/s"
    assert data["engine"] == [{"package": "numpy", "old": "2.3.4", "new": "2.4.0"}]
    assert data["claims"][0]["broken"] and data["claims"][1]["broken"]
    md = course(release, "diff", LESSON, "--markdown").stdout
    assert (
        "| `decode.tps_long` | 201.7 tok/s | 150 tok/s | -25.6 % | no spread recorded (beyond "
        "5 %) |" in md
    )
    assert (
        "| docs/part-1/tiny.md:27 | Short is 1.5 to 1.6 times as fast. | holds | **fails** |" in md
    )


def test_diff_exits_zero_when_every_claim_holds(release: Path) -> None:
    done = course(release, "diff", LESSON, "2026-11-19T090000Z-h200", OLD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 of 5 claims hold" in done.stdout
    unknown = course(release, "diff", LESSON, "2026-01-01T000000Z-h200", OLD)
    assert unknown.returncode == 1 and "has no run '2026-01-01T000000Z-h200'" in unknown.stderr


def test_check_reports_pages_pinned_behind_the_newest_run(release: Path) -> None:
    done = course(release, "check")
    assert done.returncode == 1  # the newest run breaks claims of the page that follows it
    assert "Long decoding runs at about 200 tokens a second." in done.stderr
    page = release / "docs" / "part-1" / "tiny.md"
    text = page.read_text()
    page.write_text(text.replace("lesson: tiny-cache\n", f"lesson: tiny-cache\nrun: {OLD}\n", 1))
    try:
        done = course(release, "check")
        assert done.returncode == 0, done.stderr
        assert (
            f"pinned behind: docs/part-1/tiny.md uses run {OLD}; its lesson's newest good run is "
            f"{NEW}" in done.stderr
        )
        assert (
            "pinned behind: docs/part-1/pinned.md uses run 2026-11-19T090000Z-h200" in done.stderr
        )
    finally:
        page.write_text(text)


def test_run_history_lists_every_run_with_headline_values(release: Path) -> None:
    from course.pages.context import PageContext
    from course.pages.history import run_history
    from course.pages.lessons import read_meta

    meta, raw, _ = read_meta(release / "docs/part-1/tiny.md", "docs/part-1/tiny.md")
    ctx = PageContext(release, "part-1/tiny.md", meta, raw, "part-1/tiny/", None)
    html = run_history(ctx, ["decode.tps_short", "decode.tps_long"])
    assert not ctx.problems
    rows = html.split("<tr>")[2:]
    assert [r.split("<code>")[1].split("</code>")[0] for r in rows] == [
        "2026-11-22T090000Z-h200",
        "2026-11-21T090000Z-h200",
        OLD,
        "2026-11-19T090000Z-h200",
    ]
    assert "(this page)" in rows[0] and "numpy 2.4.0" in rows[0] and "numpy 2.3.4" in rows[2]
    assert f'data-source="{NEW}/decode.tps_long">150 tok/s' in rows[0]
    assert f'data-source="{OLD}/decode.tps_long">201.7 tok/s' in rows[2]
    assert "failed" in rows[1]
    labelled = run_history(ctx, {"short <b>": "decode.tps_short"})
    assert (
        "<th>short &lt;b&gt;</th>" in labelled
        and f'data-source="{NEW}/decode.tps_short"' in labelled
    )
    run_history(ctx, ["decode.nope"])
    assert any("captured no value 'nope'" in p.message for p in ctx.problems)
    assert Store(release / "build").newest_good(LESSON).run_id == NEW  # type: ignore[union-attr]


def test_diff_refuses_a_lab_yml_it_cannot_read_rather_than_judge_without_it(
    release: Path, tmp_path: Path
) -> None:
    root = tmp_path / "site"
    shutil.copytree(release, root)
    lab = root / "lab" / LESSON / "lab.yml"
    lab.write_text(lab.read_text() + "noise: {between_hosts: 400}\n")
    done = course(root, "diff", LESSON)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"lab/{LESSON}/lab.yml" in done.stderr and "between_hosts" in done.stderr, done.stderr
    lab.unlink()  # a lesson whose lab is gone: its runs still compare, without declarations
    assert "claims hold" in course(root, "diff", LESSON).stdout
