"""What a terminal would show: ANSI codes removed, carriage returns applied (secrets are masked by
`masking.py`)."""

from __future__ import annotations

import re

from ..record.models import PROMPT

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)
_CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]")


def clean(raw: str) -> str:
    """Text as a terminal leaves it on screen: no escape codes, `\\r` overwrites, backspaces
    applied.
    """
    text = _ANSI.sub("", raw).replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        if "\r" in line or "\b" in line:
            line = _overwrite(line)
        lines.append(_CONTROL.sub("", line))
    return "\n".join(lines)


def _overwrite(line: str) -> str:
    """One line as the screen shows it: `\\r` returns to its start, `\\b` steps back, text
    overwrites.
    """
    screen: list[str] = []
    cursor = 0
    for char in line:
        if char == "\r":
            cursor = 0
        elif char == "\b":
            cursor = max(0, cursor - 1)
        else:
            if cursor < len(screen):
                screen[cursor] = char
            else:
                screen.append(char)
            cursor += 1
    return "".join(screen)


def transcript(command: str, output: str) -> str:
    """A step's transcript: the command after the prompt, then its cleaned output."""
    body = clean(output)
    if body and not body.endswith("\n"):
        body += "\n"
    return f"{PROMPT}{command}\n{body}"


def tail(text: str, n: int = 20) -> list[str]:
    """The last n non-empty-at-end lines of a text."""
    lines = clean(text).rstrip("\n").split("\n")
    return [] if lines == [""] else lines[-n:]
