"""bench/main_thread.py on two tiny sites in real Chromium: one whose script holds the main thread
for 150 ms after the first paint, one without; the bench must find the difference, pair it load
by load, and name the script that took the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import REPO

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>t</title></head>
<body><h1>A lesson</h1><p>{words}</p>{script}</body></html>
"""
BUSY = """// holds the main thread well after the page has painted, however loaded the machine
addEventListener("load", function () {
  setTimeout(function () {
    var end = performance.now() + 150;
    while (performance.now() < end) {}
  }, 300);
});
"""


def make_site(folder: Path, busy: bool) -> Path:
    (folder / "page").mkdir(parents=True)
    (folder / "index.html").write_text(PAGE.format(words="home", script=""))
    script = '<script src="../busy.js"></script>' if busy else ""
    (folder / "page" / "index.html").write_text(PAGE.format(words="word " * 500, script=script))
    (folder / "busy.js").write_text(BUSY)
    return folder


def test_the_bench_finds_a_long_task_and_names_its_script(tmp_path: Path) -> None:
    calm, busy = make_site(tmp_path / "calm", False), make_site(tmp_path / "busy", True)
    out = tmp_path / "loads.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "main_thread.py"), str(calm), str(busy),
         "--pages", "/page/", "--loads", "2", "--rate", "1", "--settle", "900",
         "--json", str(out)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    loads = json.loads(out.read_text())
    assert [(x["site"], x["n"]) for x in loads] == [
        (str(calm), 1),
        (str(busy), 1),
        (str(calm), 2),
        (str(busy), 2),
    ]  # interleaved, so that each busy load has a calm one beside it
    for load in loads:
        ms = load["ms"]
        assert 0 <= ms["blocking"] <= ms["long"] <= ms["tasks"]
        assert ms["parse"] > 0
    for load in (x for x in loads if x["site"] == str(busy)):
        assert load["ms"]["blocking"] >= 90  # the 150 ms task, less the 50 ms allowed
        assert load["ms"]["script"] >= 140
        assert "busy.js" in load["longest"][0], load["longest"]
    for load in (x for x in loads if x["site"] == str(calm)):
        assert load["ms"]["script"] < 50
    assert "difference" in done.stdout  # the busy site's row, paired with the calm one
    assert "4 loads at 1× in" in done.stdout
