"""What a run shows while it goes: each step's output, live, under a progress line."""

from __future__ import annotations

import os
import threading
from types import TracebackType

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..lab.schema import step_kind
from ..record.masking import Redactor
from ..record.models import Run
from .plan import Plan
from .terminal import clean


class Display:
    """Streams step output line by line above a progress line (step i of n, id, elapsed)."""

    def __init__(self, console: Console, redact: Redactor, quiet: bool = False) -> None:
        self.console = console
        self.redact = redact
        self.quiet = quiet
        self._lock = threading.Lock()
        self._partial: dict[str, str] = {}
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> Display:
        self._progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.flush()
        self._progress.__exit__(kind, exc, tb)

    def step(self, index: int, total: int, step_id: str, what: str) -> None:
        """Show that step `index` of `total` has started."""
        self.flush()
        description = f"step {index} of {total}: {step_id} ({what})"
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(description, total=None)
        self.console.print(Text(f"── {description}", style="bold cyan"))

    def note(self, message: str, style: str = "dim") -> None:
        """A line of the runner's own."""
        self.console.print(Text(message, style=style))

    def output(self, source: str, text: str, prefix: str = "") -> None:
        """A chunk of a process's output; complete lines are printed at once."""
        if self.quiet:
            return
        with self._lock:
            buffered = self._partial.get(source, "") + text
            *lines, rest = buffered.split("\n")
            self._partial[source] = rest
            for line in lines:
                self._print(prefix, line)

    def flush(self) -> None:
        """Print any unfinished lines."""
        with self._lock:
            for source, rest in list(self._partial.items()):
                if rest:
                    self._print("", rest)
                self._partial[source] = ""

    def _print(self, prefix: str, line: str) -> None:
        shown = self.redact(clean(line))
        text = Text(prefix, style="magenta") + Text(shown) if prefix else Text(shown)
        try:
            self.console.print(text, soft_wrap=True)
        except OSError:  # the terminal is gone (hung up): the run goes on, unseen
            self.console.file = open(os.devnull, "w")  # noqa: SIM115 - lives with the console


def plan_table(plan: Plan) -> Table:
    """The dry run's table: what each step would do, and why."""
    gpu = plan.steps[0].parts.gpu if plan.steps else "none"
    table = Table(title=f"Plan (GPU: {gpu})", title_justify="left")
    for col in ("#", "step", "kind", "needs", "action", "why"):
        table.add_column(col)
    for i, sp in enumerate(plan.steps, start=1):
        style = {"run": "bold", "reuse": "green", "skip": "yellow"}[sp.action]
        table.add_row(
            str(i),
            sp.step.id,
            step_kind(sp.step),
            sp.step.needs or "",
            f"[{style}]{sp.action}",
            sp.reason,
        )
    return table


def summary_table(run: Run) -> Table:
    """The table printed after a run."""
    rec = run.record
    table = Table(title=f"{rec.lesson}: run {rec.run_id} — {rec.status}", title_justify="left")
    for col in ("step", "status", "seconds", "values", "files"):
        table.add_column(col)
    for step in rec.steps:
        status = step.status if step.status != "reused" else f"reused ({step.reused_from})"
        secs = f"{step.seconds:.2f}" if step.seconds is not None else ""
        table.add_row(step.id, status, secs, str(len(step.values)), str(len(step.files)))
    return table
