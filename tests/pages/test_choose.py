"""The run a page shows when its lesson was also run on another card: the lab's `resources.gpu`
names the card the page is written for, and the page, `check` and `diff` follow the runs on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import FIXTURES
from support import course_at as course

from course.pages.choose import lesson_page_runs
from course.pages.feed import feed_entries
from course.pages.lessons import PageEntry, read_meta
from course.pages.outline import load_outline
from course.pages.render import render_page
from course.record.files import dump_json
from course.record.store import Store

LESSON = "tiny-cache"
OLDER, OLD = "2026-11-19T090000Z-h200", "2026-11-20T090000Z-h200"
H100 = "2026-11-23T090000Z-h100-80gb-hbm3"
CLAIM = "Long decoding runs at about 200 tokens a second."


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The fixture site plus a newer good run on an H100, where a number the page states moved."""
    root = tmp_path / "site"
    shutil.copytree(FIXTURES / "site", root)
    old, new = root / "build" / LESSON / OLD, root / "build" / LESSON / H100
    shutil.copytree(old, new)
    record = json.loads((old / "run.json").read_text())
    record["run_id"] = H100
    record["started"] = "2026-11-23T09:00:00Z"
    record["host"]["gpu"].update(name="NVIDIA H100 80GB HBM3", memory_mib=81559)
    (decode,) = [s for s in record["steps"] if s["id"] == "decode"]
    decode["values"]["tps_long"]["value"] = 150.0  # the page says "about 200"
    (new / "run.json").write_text(dump_json(record))
    return root


def ask_for(root: Path, card: str) -> None:
    lab = root / "lab" / LESSON / "lab.yml"
    text = lab.read_text()
    lab.write_text(text.replace("steps:\n", f"resources: {{gpu: {card}}}\n" + "steps:\n", 1))


def shown(root: Path) -> dict[str, str]:
    return {page.src: page.run_id for page in lesson_page_runs(root)}


def freshness_row(root: Path) -> str:
    """The freshness page's row of the lesson, as Markdown's HTML."""
    page = root / "docs" / "freshness.md"
    page.write_text("---\ntitle: Freshness\n---\n\n{{ freshness() }}\n")
    meta, raw, _ = read_meta(page, "docs/freshness.md")
    text = render_page(root, PageEntry("freshness.md", meta, raw)).markdown or ""
    (row,) = [r for r in text.split("<tr>") if "A tiny cache</td>" in r]
    return row


def in_feed(root: Path) -> list[str]:
    entries = feed_entries(load_outline(root / "docs"), Store(root / "build"), "https://x.org/")
    return [entry.id.rsplit("#run-", 1)[1] for entry in entries]


def test_a_lab_that_names_no_card_follows_the_newest_good_run_on_any(site: Path) -> None:
    assert shown(site)["part-1/tiny.md"] == H100
    assert in_feed(site) == [H100, OLD, OLDER]
    done = course(site, "check")
    assert done.returncode == 1 and CLAIM in done.stderr, done.stderr


def test_check_warns_when_runs_on_two_cards_meet_a_lab_that_names_none(site: Path) -> None:
    record = site / "build" / LESSON / H100 / "run.json"
    data = json.loads(record.read_text())
    (decode,) = [s for s in data["steps"] if s["id"] == "decode"]
    decode["values"]["tps_long"]["value"] = 201.7  # as on the H200: every claim holds
    record.write_text(dump_json(data))
    done = course(site, "check")
    assert done.returncode == 0, done.stderr
    assert (
        f"warning: lab/{LESSON}/lab.yml names no card, and the good runs of '{LESSON}' were made "
        f"on 2 kinds of GPU (NVIDIA H200, NVIDIA H100 80GB HBM3): its page shows the newest, "
        f"{H100} on NVIDIA H100 80GB HBM3, whatever the card its sentences were written for; name "
        "that card in lab.yml (resources: {gpu: KIND}) to keep the page on its runs"
    ) in " ".join(done.stderr.split()), done.stderr
    ask_for(site, "H200")
    named = course(site, "check")
    assert named.returncode == 0 and "names no card" not in named.stderr, named.stderr


def test_a_run_on_another_card_stays_a_record_without_moving_the_page(site: Path) -> None:
    ask_for(site, "H200")
    assert shown(site) == {"part-1/tiny.md": OLD, "part-1/pinned.md": OLDER}
    assert in_feed(site) == [OLD, OLDER]  # the learners' feed: no page moved
    row = freshness_row(site)  # the authors' freshness page: the page's run, and the record beside
    assert f"<code>{OLD}</code>" in row
    assert f"newer run {H100} ok on NVIDIA H100 80GB HBM3" in row
    done = course(site, "check")
    assert done.returncode == 0, done.stderr
    # the default diff compares the two newest good runs on the lab's card
    same_card = course(site, "diff", LESSON)
    assert same_card.returncode == 0, same_card.stdout + same_card.stderr
    assert f"{LESSON}: {OLDER} → {OLD}" in same_card.stdout
    # named runs are compared across cards, and the claim the page states fails on the H100's
    across = course(site, "diff", LESSON, OLD, H100)
    assert across.returncode == 1 and f"{OLD} → {H100}" in across.stdout
    assert "FAILS" in across.stdout


def test_a_card_without_a_good_run_is_named_with_the_remedy(site: Path) -> None:
    ask_for(site, "A100-80GB")
    done = course(site, "check")
    assert done.returncode == 1
    assert (
        f"no good run of '{LESSON}' on A100-80GB in build/{LESSON}/ (lab/{LESSON}/lab.yml's "
        f"resources.gpu asks for A100-80GB; its newest good run, {H100}, ran on NVIDIA H100 80GB "
        f"HBM3): run `course run {LESSON}` on a machine with A100-80GB" in done.stderr
    ), done.stderr
    assert "docs/part-1/tiny.md" in done.stderr
    assert "docs/part-1/pinned.md" not in done.stderr  # a pinned page keeps its run
    diff = course(site, "diff", LESSON)
    assert diff.returncode == 1
    assert (
        f"'{LESSON}' needs two good runs on A100-80GB (the card its lab asks for) to compare "
        "(good runs on it: none); name them explicitly" in diff.stderr
    ), diff.stderr
