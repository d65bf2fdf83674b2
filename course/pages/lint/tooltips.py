"""What a `fact()` tooltip shows (the fact's source and note, written in the facts file) is read
by learners too: it is held to the same words as the page."""

from __future__ import annotations

import re

from ...errors import FactsError
from ...lab.facts import FACTS_FILE, Facts
from .findings import Finding, quoted

_FACT_CALL = re.compile(r"""fact\(\s*["']([^"']+)["']""")


def fact_tooltips(
    file: str, body: str, first_line: int, facts: Facts | None, phrases: re.Pattern[str] | None
) -> list[Finding]:
    """Words about the tooling in what a `fact()` tooltip shows (its source and note, written in
    the facts file), at the first line of the page that inserts the fact."""
    if phrases is None or facts is None:
        return []
    found, seen = [], set()
    for match in _FACT_CALL.finditer(body):
        name = match.group(1)
        if name in seen:
            continue
        seen.add(name)
        try:
            fact = facts.lookup(name)
        except FactsError:
            continue  # the page's own problems name it
        said = f"{fact.cite}. {fact.note or ''}"
        if (words := phrases.search(said)) is None:
            continue
        line = first_line + body.count("\n", 0, match.start())
        found.append(
            Finding(
                file, line, "fact-note",
                f"fact {name}'s tooltip: {quoted(words.group(0))} is about the course's tooling, "
                f"not the subject: {quoted(said, 100)} (reword it in {FACTS_FILE})",
            )
        )  # fmt: skip
    return found
