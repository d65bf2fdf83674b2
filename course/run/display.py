"""What a run shows while it goes: each step's output, live, under a progress line.

The steps' reader threads only hand their output over (`output`); a printer thread of the display
shows it a few times a second, in batches, so that a step is never slowed by the console. What the
console keeps is capped, so the cost stays linear in the output: a batch shows at most
`BATCH_LINES` lines (its last ones, after a line saying how many it left out) and a line at most
`LINE_CHARS` characters. The transcripts keep everything (see `process.OutputLog`).
"""

from __future__ import annotations

import os
import threading
from collections import deque
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

BATCH_LINES = 200
"""Lines shown of one batch of output (about a tenth of a second of it)."""
LINE_CHARS = 2000
"""Characters shown of one line."""
INTERVAL = 0.1
"""Seconds between two batches."""


class _Partial:
    """The unfinished last line of one source: its start (up to LINE_CHARS) and its length."""

    def __init__(self) -> None:
        self.text = ""
        self.length = 0

    def add(self, text: str) -> None:
        if len(self.text) < LINE_CHARS:
            self.text += text[: LINE_CHARS - len(self.text)]
        self.length += len(text)

    def take(self) -> str:
        line = _shorten(self.text, self.length)
        self.text, self.length = "", 0
        return line


def _shorten(line: str, length: int | None = None) -> str:
    """A line cut to LINE_CHARS characters, saying how many more it had."""
    length = len(line) if length is None else length
    if length <= LINE_CHARS:
        return line
    return f"{line[:LINE_CHARS]} [... {length - LINE_CHARS:,} more characters]"


class Display:
    """Streams step output line by line above a progress line (step i of n, id, elapsed)."""

    def __init__(self, console: Console, redact: Redactor, quiet: bool = False) -> None:
        self.console = console
        self.redact = redact
        self.quiet = quiet
        self._lock = threading.Lock()
        """Guards what the readers hand over (`_pending`)."""
        self._printing = threading.Lock()
        """Held while a batch is printed (by the printer thread, or by `flush`)."""
        self._pending: list[tuple[str, str, str]] = []
        self._partial: dict[str, _Partial] = {}
        self._prefixes: dict[str, str] = {}
        self._wake = threading.Event()
        self._closed = False
        self._printer: threading.Thread | None = None
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
        if not self.quiet:
            self._printer = threading.Thread(target=self._print_loop, daemon=True)
            self._printer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed = True
        self._wake.set()
        if self._printer is not None:
            self._printer.join(timeout=5)
        self.flush()
        self._progress.__exit__(kind, exc, tb)

    def step(self, index: int, total: int, step_id: str, what: str) -> None:
        """Show that step `index` of `total` has started."""
        self.flush()
        description = f"step {index} of {total}: {step_id} ({what})"
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(description, total=None)
        self._write(Text(f"── {description}", style="bold cyan"))

    def note(self, message: str, style: str = "dim") -> None:
        """A line of the runner's own (after the output handed over before it)."""
        self.flush()
        self._write(Text(message, style=style))

    def output(self, source: str, text: str, prefix: str = "") -> None:
        """A chunk of a process's output (from its reader thread): shown with the next batch."""
        if self.quiet:
            return
        with self._lock:
            self._pending.append((source, prefix, text))
        if self._printer is None:  # not entered: no printer thread, show it now
            self.flush(partial=False)

    def flush(self, partial: bool = True) -> None:
        """Print what was handed over, and (with `partial`) any unfinished lines."""
        with self._printing:
            self._print_batch()
            if partial:
                parts = self._partial.items()
                self._show([(self._prefixes[s], p.take()) for s, p in parts if p.length], 0)

    def _print_loop(self) -> None:
        while not self._closed:
            self._wake.wait(INTERVAL)
            with self._printing:
                self._print_batch()

    def _print_batch(self) -> None:
        """Split what was handed over into lines; show the last BATCH_LINES of them."""
        with self._lock:
            pending, self._pending = self._pending, []
        lines: deque[tuple[str, str]] = deque(maxlen=BATCH_LINES)
        count = 0
        for source, prefix, text in pending:
            self._prefixes[source] = prefix
            part = self._partial.setdefault(source, _Partial())
            if "\n" not in text:
                part.add(text)
                continue
            first, *middle, last = text.split("\n")
            part.add(first)
            lines.append((prefix, part.take()))
            lines.extend((prefix, _shorten(line)) for line in middle)
            count += 1 + len(middle)
            part.add(last)
        self._show(list(lines), count - len(lines))

    def _show(self, lines: list[tuple[str, str]], skipped: int) -> None:
        if not lines and not skipped:
            return
        text = Text()
        if skipped:
            text.append(f"[... {skipped:,} lines not shown here ...]\n", style="dim")
        shown = self.redact(clean("\n".join(line for _, line in lines)))
        for (prefix, _), line in zip(lines, shown.split("\n"), strict=False):
            if prefix:
                text.append(prefix, style="magenta")
            text.append(line + "\n")
        text.rstrip()
        self._write(text)

    def _write(self, text: Text) -> None:
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
