"""A lesson's Sources: every entry has an address (a link a reader can follow), except the course's
own recorded run, which the page's closing box describes."""

from __future__ import annotations

import re

from .findings import Finding, quoted

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^[-*+]\s+|^\d+[.)]\s+")
_ADDRESS = re.compile(r"https?://[^\s)>\]]+")
_BARE = re.compile(r"(?<![\w/@.])(?:[a-z0-9-]+\.)+(?:com|org|io|ai|dev|net|edu|co)(?:/[^\s),;]*)?")
_OWN_RUN = re.compile(r"recorded run|provenance\(", re.IGNORECASE)


def source_entries(body: str, first_line: int) -> list[tuple[int, str]]:
    """(line, text) of each list entry under the page's "Sources" heading, its continuation lines
    joined."""
    entries: list[tuple[int, str]] = []
    level = 0
    for number, line in enumerate(body.split("\n"), start=first_line):
        heading = _HEADING.match(line)
        if heading:
            if level and len(heading.group(1)) <= level:
                break
            if heading.group(2).strip().lower() == "sources":
                level = len(heading.group(1))
            continue
        if not level or not line.strip():
            continue
        if _ITEM.match(line):
            entries.append((number, _ITEM.sub("", line).strip()))
        elif entries and line.startswith((" ", "\t")):
            entries[-1] = (entries[-1][0], f"{entries[-1][1]} {line.strip()}")
    return entries


def source_addresses(file: str, body: str, first_line: int) -> list[Finding]:
    """Each entry of the Sources section without an address."""
    found = []
    for line, text in source_entries(body, first_line):
        if _ADDRESS.search(text) or _OWN_RUN.search(text):
            continue
        bare = _BARE.search(text)
        fix = (
            f"it names {bare.group(0)} without https://: write it as a link, "
            f"[...](https://{bare.group(0)})"
            if bare
            else "give the address it was read at, as a link [...](https://...)"
        )
        found.append(
            Finding(file, line, "source-address", f"{quoted(text, 80)} has no address: {fix}")
        )
    return found
