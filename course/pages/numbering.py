"""One numbering of a lab's steps for the page, START-HERE.md and the lab's README: the page's.

A lesson page's hands-on section names its steps in headings (`### Step 6: the same three
measurements with llama.cpp`) and shows the lab steps it runs with `terminal("llama-chat")`.
START-HERE.md numbers lab.yml's steps by those headings: a lab step shown under "Step 6" is step
6, a step the page does not show (a server stopped, a second file converted) belongs with the
one before it, and where several lab steps share a page step they are lettered (6a, 6b, ...).
A page without "Step N" headings numbers the lab steps 1, 2, 3, ... as lab.yml orders them.
"""

from __future__ import annotations

import re
import string

_HEADING = re.compile(r"^#{2,6}[ \t]+Step[ \t]+(\d+)\b", re.MULTILINE)
_ANY_HEADING = re.compile(r"^#{1,2}[ \t]+\S", re.MULTILINE)
_TERMINAL = re.compile(r"""\bterminal\(\s*["']([a-z0-9][a-z0-9-]*)["']""")


def shown_steps(markdown: str) -> dict[str, int]:
    """The lab steps a page shows (`terminal("id")`) under each of its "Step N" headings."""
    marks = list(_HEADING.finditer(markdown))
    found: dict[str, int] = {}
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(markdown)
        section = markdown[mark.end() : end]
        top = _ANY_HEADING.search(section)  # an h1 or h2 ends the hands-on section
        section = section[: top.start()] if top else section
        for step in _TERMINAL.findall(section):
            found.setdefault(step, int(mark.group(1)))
    return found


def step_labels(markdown: str | None, step_ids: list[str]) -> dict[str, str]:
    """Each lab step's label as the page numbers it: '1', '2', '6a', '6b', ..."""
    shown = shown_steps(markdown or "")
    if not any(step in shown for step in step_ids):
        return {step: str(index) for index, step in enumerate(step_ids, start=1)}
    numbers: list[int] = []
    for step in step_ids:
        if step in shown:
            numbers.append(shown[step])
        elif numbers:
            numbers.append(numbers[-1])  # not shown: it goes with the step before it
        else:  # before the first step the page shows: it goes with that one
            numbers.append(next(shown[s] for s in step_ids if s in shown))
    labels = {}
    for step, number in zip(step_ids, numbers, strict=True):
        group = [s for s, n in zip(step_ids, numbers, strict=True) if n == number]
        letter = "" if len(group) == 1 else _letter(group.index(step))
        labels[step] = f"{number}{letter}"
    return labels


def _letter(index: int) -> str:
    """a, b, ..., z, aa, ab, ... for the steps that share a page step."""
    letters = string.ascii_lowercase
    return letters[index] if index < 26 else _letter(index // 26 - 1) + letters[index % 26]
