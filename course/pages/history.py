"""The macros that describe runs rather than values: how the outputs were made, every run so far."""

from __future__ import annotations

import html

from ..errors import CourseError, RecordError
from ..record.changes import run_changes
from ..record.models import Run
from ..record.store import Store
from . import facts
from .context import PageContext
from .format import day, recorded_text
from .format import recorded as shown_value
from .macros import macro
from .numbering import step_labels


@macro
def provenance(ctx: PageContext) -> str:
    """One sentence on how the outputs were made: date, machine, versions, run id."""
    run = ctx.run
    gpu = facts.gpu_name(run) or "a machine without a GPU"
    host = run.record.host
    details = []
    if host.gpu is not None:
        details += [f"driver {host.gpu.driver}"] if host.gpu.driver else []
        details += [f"CUDA {host.gpu.cuda}"] if host.gpu.cuda else []
    details += [f"Python {host.python}"] if host.python else []
    article = "an " if gpu.startswith("NVIDIA") else ""
    return (
        f'<span class="course-provenance" data-source="{html.escape(run.run_id)}">The outputs on '
        f"this page come from one run of this lesson's lab on {facts.checked_on(run)} on "
        f"{article}{recorded_text(gpu)} "
        f"({recorded_text(', '.join(details))}) with {recorded_text(facts.engine_text(run))}; "
        f"run <code>{html.escape(run.run_id)}</code>.{_reused(ctx)}</span>"
    )


def _reused(ctx: PageContext) -> str:
    """' Steps 1 to 5 were measured in an earlier run, ...' for the steps the run took over
    from earlier runs (their files and versions unchanged), by the page's own numbering; ''
    when every step ran in it."""
    steps = ctx.run.record.steps
    sources: dict[str, list[str]] = {}
    for step in steps:
        if step.status == "reused" and step.reused_from:
            sources.setdefault(step.reused_from, []).append(step.id)
    if not sources:
        return ""
    page = ctx.root / "docs" / ctx.src
    markdown = page.read_text(encoding="utf-8") if page.is_file() else None
    labels = step_labels(markdown, [s.id for s in steps])
    store = Store(ctx.root / "build")
    said: list[str] = []
    for run_id, ids in sources.items():
        try:
            when = facts.checked_on(store.get(ctx.lesson, run_id))
        except RecordError:  # pruned or damaged: its id still says the day
            when = day(run_id[:10] + "T00:00:00Z")
        verb = "was" if len(ids) == 1 else "were"
        shown = f"<code>{html.escape(run_id)}</code>"
        named = named_steps(labels, ids)
        named = named if not said else named[0].lower() + named[1:]
        said.append(f"{named} {verb} measured in an earlier run, on {when} ({shown})")
    return (
        " " + "; ".join(said) + ", on the same kind of GPU with the same files and versions: this"
        " run took them over."
    )


def named_steps(labels: dict[str, str], ids: list[str]) -> str:
    """'Steps 1 to 5', 'Step 6a', 'Steps 2, 4 and 6b': a page step is named by its number when
    every lab step under it is in `ids`, else each lab step by its letter."""
    chosen = set(ids)
    by_number: dict[str, list[str]] = {}
    for step, label in labels.items():
        by_number.setdefault(label.rstrip("abcdefghijklmnopqrstuvwxyz"), []).append(step)
    names: list[str] = []
    for number, group in by_number.items():
        if all(s in chosen for s in group):
            names.append(number)
        else:
            names += [labels[s] for s in group if s in chosen]
    runs = names and all(n.isdigit() for n in names) and len(names) > 2
    if runs and [int(n) for n in names] == list(range(int(names[0]), int(names[-1]) + 1)):
        return f"Steps {names[0]} to {names[-1]}"
    if len(names) == 1:
        return f"Step {names[0]}"
    return f"Steps {', '.join(names[:-1])} and {names[-1]}"


@macro
def run_history(ctx: PageContext, headline: list[str] | dict[str, str] | None = None) -> str:
    """Every recorded run of the lesson: date, GPU, engine versions and headline values side by
    side.

    `headline` lists values (`step.name`), or maps a column label to each.
    """
    runs = Store(ctx.root / "build").runs(ctx.lesson)
    if isinstance(headline, dict):
        labelled = {html.escape(label): name for label, name in headline.items()}
    else:
        labelled = {f"<code>{html.escape(n)}</code>": n for n in headline or []}
    for name in labelled.values():  # an unknown headline value is the author's typo: say so
        ctx.lookup(name)
    return runs_table(runs, ctx.run.run_id, labelled)


def runs_table(
    runs: list[Run],
    shown: str | None,
    labelled: dict[str, str],
    label: str = "Run history",
    authors: bool = False,
) -> str:
    """Runs, newest first, as a table: run, date, status, GPU, engine, then each labelled value;
    for `authors`, each run's note (`course run --note`) and what its lab changed from the run
    before (`record.changes.run_changes`).

    `shown` is the run the page shows (marked); `labelled` maps column headers (HTML) to values.
    """
    names = list(labelled.values())
    extra = ["note", "changed from the run before"] if authors else []
    head = ["run", "date", "status", "GPU", "engine", *extra, *labelled]
    rows = []
    for index in reversed(range(len(runs))):
        run = runs[index]
        this = " (this page)" if run.run_id == shown else ""
        cells = [
            f"<code>{html.escape(run.run_id)}</code>{this}",
            html.escape(facts.checked_on(run)),
            html.escape(run.record.status),
            html.escape(facts.gpu_name(run) or "no GPU"),
            html.escape(facts.engine_text(run)),
        ]
        if authors:
            changed = run_changes(runs[index - 1].record, run.record) if index else ["first run"]
            cells += [html.escape(run.record.note or "—"), html.escape("; ".join(changed) or "—")]
        for name in names:
            step, value_name = name.split(".", 1)
            try:
                found = run.value(step, value_name)
            except CourseError:
                cells.append("—")
                continue
            source = html.escape(f"{run.run_id}/{name}", quote=True)
            text = shown_value(found.value, found.unit)
            text = recorded_text(text) if isinstance(found.value, str) else html.escape(text)
            cells.append(f'<span class="course-value" data-source="{source}">{text}</span>')
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
    return (
        '<div class="course-history md-typeset__scrollwrap" tabindex="0" role="region" '
        f'aria-label="{html.escape(label, quote=True)}"><div class="md-typeset__table"><table>'
        f"<thead>{header}</thead><tbody>{''.join(rows)}</tbody></table></div></div>"
    )
