"""A recorded command wider than a terminal block is shown folded, as the shell still reads it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import make_project

from course.pages.widgets import PROMPT, TERMINAL_COLUMNS, fold_command, wide_lines
from course.site import check_site

SERVER = (
    "llama-server -m gguf/qwen3-8b-q8_0.gguf -ngl 99 -fa on -np 4 -c 36864 --cache-ram 0 -lv 4 "
    "--host 127.0.0.1 --port 8242 --log-file server-4.log"
)
QUOTED = (
    "python3 prompts.py --text 'a long sentence with spaces that must stay one word' "
    '--out "results/one file.json" --repeat 20 --depths 0 4096 8192 16384 32768 --note x'
)


def words_as_bash_reads_them(command: str) -> list[str]:
    """The arguments bash passes for `command` (its first word replaced by printf)."""
    done = subprocess.run(
        ["bash", "-c", "printf '%s\\n' " + command.split(" ", 1)[1]],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize("command", [SERVER, QUOTED])
def test_a_wide_command_folds_within_the_block_and_reads_the_same(command: str) -> None:
    folded = fold_command(command)
    lines = folded.split("\n")
    assert len(PROMPT) + len(command) > TERMINAL_COLUMNS  # it needed folding
    assert len(lines) >= 2
    assert all(len(PROMPT) + len(line) <= TERMINAL_COLUMNS for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert all(line.startswith("    ") and not line.startswith("     ") for line in lines[1:])
    assert wide_lines(folded, [], []) == []
    assert words_as_bash_reads_them(folded) == words_as_bash_reads_them(command)


def test_an_option_keeps_its_value_on_its_line() -> None:
    lines = fold_command(SERVER).split("\n")
    assert any("--port 8242" in line for line in lines)
    assert not any(line.rstrip(" \\").endswith(("--port", "-c", "-np")) for line in lines)


@pytest.mark.parametrize(
    "command",
    ["python3 size.py --tiny", "python3 a.py \\\n  --b c", "python3 " + "x" * 120],
)
def test_commands_that_fit_or_cannot_fold_are_left_alone(command: str) -> None:
    assert fold_command(command) == command


def test_a_word_too_long_for_any_line_is_still_reported_wide() -> None:
    folded = fold_command("python3 run.py --file " + "d/" * 60 + "f.json --x 1")
    assert wide_lines(folded, [], []) != []


def test_a_wide_output_line_fails_the_check_unless_the_page_accepts_it(tmp_path: Path) -> None:
    """A line wider than a block shows whole stops `course check`, naming the page, the call and
    the line; a page may accept one the lab cannot narrow (another program's log) by its number,
    and an acceptance that no longer holds is itself a problem."""
    root = make_project(tmp_path / "project")
    log = "0.01.594.198 I llama_kv_cache: size = " + "448.00 MiB " * 8  # 126 characters
    for transcript in (root / "build" / "tiny-cache").glob("*/steps/decode.txt"):
        transcript.write_text(transcript.read_text(encoding="utf-8") + log + "\n")
    page = root / "docs/part-1/tiny.md"
    shown = '{{ terminal("decode", lines="1-2,11-") }}'  # the page's own call, which would show it
    written = page.read_text(encoding="utf-8")
    assert shown in written
    written = written.replace(shown, '{{ terminal("decode", lines="1-2,11-14") }}')

    def problems_with(call: str) -> list[str]:
        page.write_text(written + f"\n{call}\n", encoding="utf-8")
        return [str(p) for p in check_site(root)[1]]

    assert problems_with('{{ terminal("decode", lines="14-") }}') == [
        "docs/part-1/tiny.md: terminal('decode', lines='14-'): line 15 "
        f"({len(log)} characters): wider than the {TERMINAL_COLUMNS} characters a terminal "
        "block shows whole at 1280 px and in the PDF (print it narrower in the lab; a line the "
        'lab cannot narrow, such as another program\'s log, the page may accept with wide="N")'
    ]
    assert problems_with('{{ terminal("decode", lines="14-", wide="15") }}') == []
    assert problems_with('{{ terminal("decode", lines="14-", wide="14-15") }}') == [
        "docs/part-1/tiny.md: terminal('decode', lines='14-', wide='14-15'): wide='14-15': "
        f"line 14 is 49 characters, not wider than the {TERMINAL_COLUMNS} characters a block "
        "shows whole: take it out of wide="
    ]
    assert problems_with('{{ terminal("decode", lines="1-2", wide="15") }}')[0].endswith(
        "wide='15': line 15 is not shown, not wider than the 100 characters a block shows "
        "whole: take it out of wide="
    )
    assert (
        "wide='16-': '16-' is outside the output's 15 lines"
        in problems_with('{{ terminal("decode", wide="16-") }}')[0]
    )
