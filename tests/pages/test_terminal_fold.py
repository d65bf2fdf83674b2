"""A recorded command wider than a terminal block is shown folded, as the shell still reads it."""

from __future__ import annotations

import subprocess

import pytest

from course.pages.widgets import PROMPT, TERMINAL_COLUMNS, fold_command, wide_lines

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
