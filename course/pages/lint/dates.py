"""A date typed by hand that is the day of one of the lesson's recorded runs ("Steps 1 to 5 were
measured on 1 December 2026"): the sentence goes stale with the next run, and `provenance()`
says it from the record. Dates of other days (a model's release, a source read) are left alone.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping

from .findings import Finding, quoted
from .marked import Prose

_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTH = "|".join(name for name in calendar.month_name if name)
_DATE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}}) (?P<m1>{_MONTH}),? (?P<y1>\d{{4}})"
    rf"|(?P<m2>{_MONTH}) (?P<d2>\d{{1,2}}),? (?P<y2>\d{{4}}))\b"
)


def typed_run_dates(prose: Prose, run_days: Mapping[str, list[str]]) -> list[Finding]:
    """Each date the author typed ('1 December 2026', 'December 1, 2026') that is the day
    (YYYY-MM-DD) of a recorded run in `run_days` (day -> run ids)."""
    found = []
    for match in _DATE.finditer(prose.text):
        if not prose.all_typed(match.start(), match.end()):
            continue  # printed by a macro from the record
        day, month, year = (match.group(g + "1") or match.group(g + "2") for g in "dmy")
        iso = f"{year}-{_MONTHS[month.lower()]:02d}-{int(day):02d}"
        runs = run_days.get(iso)
        if not runs:
            continue
        found.append(
            Finding(
                prose.file,
                prose.line_at(match.start()),
                "typed-date",
                f"{quoted(match.group(0))} is typed by hand and is the day of the lesson's run"
                f" {runs[0]}{' and others' if len(runs) > 1 else ''}: a sentence on when steps"
                " were measured goes stale with the next run; provenance() says it from the"
                " record",
                match.group(0),
            )
        )
    return found
