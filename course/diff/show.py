"""`course diff`'s report as a person or a script reads it: rich tables that read at 80 columns,
Markdown for a pull request, JSON; numbers in the one format (`pages/format.py`), each pair of
values in a unit a person reads.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from ..pages.format import change as change_text
from ..pages.format import recorded, significant
from ..record.models import Value
from ..record.units import convert, readable_unit
from .report import Report, ValueChange, same_dimension


def shown(value: Value | None, unit: str | None = None) -> str:
    """A value with its unit, as the diff prints it (in `unit` when given: `readable_unit`)."""
    if value is None:
        return "—"
    if unit is None or isinstance(value.value, str) or unit == value.unit:
        return recorded(value.value, value.unit)
    return recorded(convert(value.value, value.unit, unit), unit)


def shown_pair(change: ValueChange) -> tuple[str, str]:
    """Both sides of a change in one unit a person reads (`0.2794 ms`, not `0.0002794 s`)."""
    numbers = [
        convert(v.value, v.unit, change.old.unit if change.old else v.unit)
        for v in (change.old, change.new)
        if v is not None and not isinstance(v.value, str)
    ]
    first = change.old or change.new
    unit = readable_unit(numbers, first.unit) if first and numbers else None
    if change.old and change.new and not same_dimension(change.old, change.new):
        unit = None
    return shown(change.old, unit), shown(change.new, unit)


def why(change: ValueChange, report: Report, short: bool = False) -> str:
    """What decided a value's class: its quartiles in both runs, the tolerance, the lab's noise
    between hosts (and the `noise.values` pattern that set it), its `scales: free` or a build's
    date and duration (`short`: for a narrow column)."""
    verdict, first = change.verdict, change.old or change.new
    if verdict.kind == "chance":
        fact = report.rules.facts.get(change.name)
        return "" if short else fact or "varies from run to run (lab.yml: scales: free)"
    if verdict.no_spread:
        side = "beyond" if verdict.kind == "moved" else "within"
        tolerance = report.tolerance * 100
        return "none recorded" if short else f"no spread recorded ({side} {tolerance:g} %)"
    if verdict.quartiles is None or first is None:
        return ""
    unit = readable_unit([x for q in verdict.quartiles for x in q], first.unit)
    (a, b), (c, d) = ((convert(x, first.unit, unit) for x in q) for q in verdict.quartiles)
    before, after = f"{significant(a)}–{significant(b)}", f"{significant(c)}–{significant(d)}"
    share, pattern = report.rules.host_noise(change.name)
    hosts = f"±{share * 100:g} %"
    unit = "" if unit == "none" else f" {unit}"  # a plain ratio
    if short:  # short lines: a narrow column never folds
        note = f"\n(hosts {hosts})" if verdict.between_hosts else ""  # a pattern would fold
        return f"{before} →\n{after}{unit}{note}"
    if verdict.between_hosts:
        by = f" for {pattern}" if pattern else ""
        return (
            f"quartiles {before} → {after}{unit} apart, within the lab's {hosts} between hosts{by}"
        )
    return f"quartiles {before} → {after}{unit} {'apart' if verdict.kind == 'moved' else 'overlap'}"


def percent(rel: float | None) -> str:
    """A relative change as a signed percentage (the one number format: `pages.format`)."""
    return change_text(rel)


SECTIONS = (
    ("moved", "Moved beyond their spread (most moved first)"),
    ("changed", "Sizes and counts that changed"),
    (
        "chance",
        "Not judged: values that vary from run to run (scales: free; a build's date and duration)",
    ),
    ("added", "Values only in the new run"),
    ("removed", "Values only in the old run"),
    ("noise", "Within noise"),
)


def summary(report: Report) -> str:
    """How many values moved, stayed within noise, changed (sizes, counts) or did not."""
    text = (
        f"{report.count('moved')} values moved beyond their spread, {report.count('noise')} "
        f"within noise, {report.count('changed')} sizes or counts changed, "
        f"{report.count('unchanged')} unchanged"
    )
    if report.count("chance"):
        facts = f"; {report.facts} a build's date or duration" if report.facts else ""
        text += f", {report.count('chance')} not judged (scales: free{facts})"
    hosts, by_pattern = report.within_hosts, report.within_hosts_by_pattern
    if hosts:
        text += f"; of those within noise, {hosts} moved beyond their quartiles by no more than "
        if not by_pattern:
            text += f"the lab's {report.between_hosts * 100:g} % between hosts"
        else:
            rest = hosts - by_pattern
            others = f", {rest} within its {report.between_hosts * 100:g} %" if rest else ""
            text += (
                f"the lab's noise between hosts ({by_pattern} as its noise.values declares{others})"
            )
    if report.without_spread:
        text += (
            f" ({report.without_spread} with no spread recorded, judged by a "
            f"{report.tolerance * 100:g} % tolerance)"
        )
    return text


def render_console(report: Report, console: Console, all_values: bool = False) -> None:
    """The diff as rich tables in the terminal (they read at 80 columns)."""
    console.print(f"[bold]{report.lesson}[/]: {report.old} → {report.new}")
    if report.notes_line:
        console.print(report.notes_line, highlight=False, markup=False)
    for title, rows in (("Host", report.host), ("Engine", report.engine)):
        if rows:
            table = Table(title=title, title_justify="left")
            for col in ("", "old", "new"):
                table.add_column(col, overflow="fold")
            for row in rows:
                table.add_row(*row)
            console.print(table)
    if report.inputs:
        table = Table(title="Lab inputs changed", title_justify="left")
        table.add_column("step")
        table.add_column("what changed", overflow="fold")
        for step, what in report.inputs:
            table.add_row(step, what)
        console.print(table)
    kinds = [*SECTIONS, *([("unchanged", "Unchanged")] if all_values else [])]
    for kind, title in kinds:
        changes = [c for c in report.values if c.verdict.kind == kind]
        if not changes:
            continue
        table = Table(title=title, title_justify="left")
        table.add_column("value", no_wrap=True)
        for col in ("old", "new", "change"):
            table.add_column(col, justify="right", overflow="fold")
        timed = kind in ("moved", "noise")
        if timed:
            table.add_column("quartiles, old → new", overflow="fold")
        for change in changes:
            cells = [change.name, *shown_pair(change), percent(change.relative)]
            table.add_row(*cells, *([why(change, report, True)] if timed else []))
        console.print(table)
    console.print(summary(report))
    if report.claims:
        table = Table(
            title="Claims (held before and fail now first)", title_justify="left", show_lines=True
        )
        table.add_column("now", no_wrap=True)
        table.add_column("claim", overflow="fold")
        for c in report.claims:
            now = "[green]holds" if c.holds_now else "[bold red]FAILS"
            before = "held" if c.held_before else "failed"
            read = ", ".join(f"{k} = {v}" for k, v in c.values_now.items())
            where = f"{c.page}:{c.line}" if c.line else c.page
            table.add_row(
                f"{now}[/]\n[dim]{before} before[/]", f"{where}\n{c.text}\n[dim]{read}[/]"
            )
        console.print(table)
    for key, old, new in report.reveals:
        console.print(f"check {key}: revealed answer {old} → {new}")
    for figure in report.figures:
        console.print(f"figure will change: {figure}")
    for reason in report.unread:
        console.print(f"[bold red]not evaluated:[/] {reason}", highlight=False)
    broken = sum(1 for c in report.claims if not c.holds_now)
    console.print(
        f"{len(report.claims) - broken} of {len(report.claims)} claims hold on {report.new}"
    )


def render_markdown(report: Report) -> str:
    """The diff as Markdown, for a pull request."""
    lines = [f"## `course diff {report.lesson}`: {report.old} → {report.new}", ""]
    lines += [report.notes_line, ""] if report.notes_line else []
    for title, rows in (("Host", report.host), ("Engine", report.engine)):
        if rows:
            lines += [f"### {title}", "", "| | old | new |", "| --- | --- | --- |"]
            lines += [f"| {k} | {o} | {n} |" for k, o, n in rows] + [""]
    if report.inputs:
        lines += ["### Lab inputs changed", "", "| step | what changed |", "| --- | --- |"]
        lines += [f"| {step} | {what} |" for step, what in report.inputs] + [""]
    for kind, title in SECTIONS:
        changes = [c for c in report.values if c.verdict.kind == kind]
        if changes:
            lines += [f"### {title}", "", "| value | old | new | change | why |"]
            lines += ["| --- | ---: | ---: | ---: | --- |"]
            for c in changes:
                old, new = shown_pair(c)
                lines.append(
                    f"| `{c.name}` | {old} | {new} | {percent(c.relative)} | {why(c, report)} |"
                )
            lines.append("")
    lines += [summary(report), ""]
    if report.claims:
        lines += ["### Claims", "", "| page | claim | before | now |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {c.page}{f':{c.line}' if c.line else ''} | {c.text} | "
            f"{'holds' if c.held_before else 'failed'} | "
            f"{'holds' if c.holds_now else '**fails**'} |"
            for c in report.claims
        ]
        lines.append("")
    if report.reveals:
        lines += ["### Checks whose revealed answer changes", ""]
        lines += [f"- {k}: {o} → {n}" for k, o, n in report.reveals] + [""]
    if report.figures:
        lines += ["### Figures that will change", ""] + [f"- {f}" for f in report.figures] + [""]
    if report.unread:
        lines += ["### Not evaluated", ""] + [f"- {u}" for u in report.unread] + [""]
    return "\n".join(lines)


def to_json(report: Report) -> str:
    """The diff as JSON, for a script."""
    data = {
        "lesson": report.lesson,
        "old": report.old,
        "new": report.new,
        "notes": {"old": report.notes[0], "new": report.notes[1]},
        "values": [
            {
                "name": c.name,
                "old": c.old.model_dump(exclude_none=True) if c.old else None,
                "new": c.new.model_dump(exclude_none=True) if c.new else None,
                "relative": c.relative,
                "differs": c.differs,
                "class": c.verdict.kind,
                "no_spread": c.verdict.no_spread,
                "between_hosts": c.verdict.between_hosts,
                "noise_pattern": report.rules.host_noise(c.name)[1],
                "varies": report.rules.facts.get(c.name),
            }
            for c in report.values
        ],
        "counts": {
            kind: report.count(kind)
            for kind in ("moved", "noise", "changed", "chance", "added", "removed", "unchanged")
        },
        "tolerance": report.tolerance,
        "between_hosts": report.between_hosts,
        "noise_values": dict(report.rules.values),
        "inputs": [{"step": step, "changes": what} for step, what in report.inputs],
        "host": [dict(zip(("field", "old", "new"), row, strict=False)) for row in report.host],
        "engine": [
            dict(zip(("package", "old", "new"), row, strict=False)) for row in report.engine
        ],
        "claims": [asdict(c) | {"broken": c.broken} for c in report.claims],
        "reveals": [
            dict(zip(("check", "old", "new"), row, strict=False)) for row in report.reveals
        ],
        "figures": report.figures,
        "not_evaluated": report.unread,
        "all_claims_hold": report.all_hold,
    }
    return json.dumps(data, indent=2, sort_keys=True, default=str)
