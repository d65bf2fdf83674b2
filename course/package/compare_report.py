"""The words of compare.py: the table of your values against the page's, its notes, a summary.

The lesson zip carries this file beside compare.py (as `lab/compare_report.py`); like it, it uses
the standard library alone, and imports nothing of compare.py (the types below are what it reads
of compare.py's objects). Numbers are written as the pages write them: thousands separators,
times in s, ms or µs, no exponents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol


class Gpu(Protocol):
    """What the report reads of a GPU (compare.py's `Gpu`): its row of the table of cards."""

    @property
    def card(self) -> dict[str, Any] | None: ...


class Theirs(Protocol):
    """What the report reads of the learner's side (compare.py's `Theirs`)."""

    @property
    def source(self) -> str: ...
    @property
    def gpu(self) -> Gpu | None: ...
    @property
    def engine(self) -> dict[str, str | None]: ...


class Row(Protocol):
    """One judged value (compare.py's `Row`)."""

    @property
    def name(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def page(self) -> Any: ...
    @property
    def theirs(self) -> Any: ...
    @property
    def expected(self) -> float | None: ...
    @property
    def verdict(self) -> str: ...
    @property
    def note(self) -> str: ...
    @property
    def off(self) -> float | None: ...


TOLERANCE_KINDS = ("bandwidth", "compute", "memory")
NOT_JUDGED = ("missing", "not comparable", "not run", "not measured", "not read")
LOOK = (
    " look for other processes on the GPU (nvidia-smi), at the clocks and power cap (nvidia-smi"
    " -q -d CLOCK,POWER), and at the engine versions."
)
NOTES = {
    "exact": "Sizes and counts follow from the models' config.json, the dtype and the engine's"
    " code alone, so they must match to the byte: check that lab/models/*/config.json are the"
    " zip's and that your engine versions are the page's (above).",
    "bandwidth": "Decode reads every weight and the cache once per token, so its speed follows"
    " the card's memory bandwidth:" + LOOK,
    "compute": "Prefill is bound by the tensor cores' bf16 FLOP/s:" + LOOK,
    "memory": "What a step holds follows the card's memory: look at what else holds GPU memory"
    " (nvidia-smi lists the processes) and at the engine versions (allocator, workspaces).",
    "far": "More than twice away from the expectation: probably not the same work. Did the step"
    " run with other arguments (--device cpu, --tiny, --weights), or on another GPU?",
    "free": "Not judged: timings of one-off work, Python overhead, measured ratios and numerical"
    " differences depend on the CPU, the driver and the libraries more than on a datasheet.",
    "undeclared": "Not judged: the lab does not say how this value moves from one machine to"
    " another; set yours beside the page's yourself.",
    "tiny": "Not comparable: these results come from the lab's CPU mode ({cpu}), which shrinks"
    " the models, so even their sizes differ from the page's on purpose, and their speeds say"
    " nothing about a GPU.",
    "cpu": "Not comparable: this step ran on the CPU (its results say so). The lab's CPU mode"
    " ({cpu}) shrinks the models, so even its sizes differ from the page's on purpose, and its"
    " speeds say nothing about a GPU.",
    "cpu-speed": "Not comparable: this step ran on the CPU, and a CPU's speed or memory says"
    " nothing about a GPU's (its sizes are still judged).",
    "null": "Not measured: your results hold no value for it. A GPU's memory is read from the GPU"
    " (nvidia-smi or PyTorch), and a machine without one has none to read.",
    "regex": "Not read: the step prints this value and no results file holds it; compare it by"
    " eye with the output START-HERE.md shows.",
}


def plain(value: float) -> str:
    """A number as the pages write it: 4 significant digits, thousands separators, no exponent
    (2.098e-05 -> 0.00002098, 4231.2 -> 4231, 123456.7 -> 123,457)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    decimals = min(12, max(0, 3 - math.floor(math.log10(abs(value)))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


def shown_unit(entry: dict[str, Any]) -> tuple[str, float]:
    """The unit a row is written in, and what one of the value's units is in it: a time in s,
    ms or µs by the size of the page's value (0.0412 s is 41.2 ms); every other unit as it is."""
    unit, value = entry["unit"], entry["value"]
    if unit not in TIME_UNITS or not isinstance(value, (int, float)) or not value:
        return unit, 1.0
    seconds = abs(value) * TIME_UNITS[unit]
    name = "s" if seconds >= 1 else "ms" if seconds >= 1e-3 else "µs"
    return name, TIME_UNITS[unit] / TIME_UNITS[name]


def cell(value: Any, type_: str, factor: float = 1.0) -> str:
    """One cell of the table: '-' for no value, a text cut to 15 characters, a number."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value if len(value) <= 15 else value[:14] + "~"
    if isinstance(value, bool):
        return str(value).lower()
    if type_ == "int":  # an expectation of a count is a fraction: 0.9 of a conversation
        return f"{value:.1f}" if abs(value) < 100 and value != int(value) else f"{round(value):,}"
    return plain(float(value) * factor)


def engine_text(engine: dict[str, str | None], page: dict[str, str | None] | None = None) -> str:
    """'torch 2.11.0, transformers 5.17.0', with the page's version where yours differs."""
    page = page or engine
    return ", ".join(
        f"{n} {v or 'not installed'}" + (f" (the page: {page.get(n)})" if page.get(n) != v else "")
        for n, v in sorted(engine.items())
    )


def uses_gpu(expected: dict[str, Any]) -> bool:
    """Whether any step of the lab needs a GPU (a CPU lab's compare says nothing of GPUs)."""
    return any(s.get("needs") == "gpu" for s in expected["steps"])


def render(e: dict[str, Any], t: Theirs, rows: Sequence[Row], page: Gpu | None) -> str:
    """The table (value, unit, page, yours, expected on your card, verdict), notes, summary."""
    entries = {v["name"]: v for v in e["values"]}
    needs = {s["id"]: s.get("needs") for s in e["steps"]}
    gpu_lab = uses_gpu(e)
    on_page = f" on {page or 'no GPU'}" if gpu_lab else ""
    on_yours = f" on {t.gpu or 'no GPU'}" if gpu_lab else ""
    lines = [
        f"{e['title']}: your run against the page's",
        f"  page:  run {e['run']}{on_page}; {engine_text(e['engine'])}",
        f"  yours: {t.source}{on_yours}; {engine_text(t.engine, e['engine'])}",
    ]
    for c in {g.card["name"]: g.card for g in (page, t.gpu) if g and g.card}.values():
        lines.append(
            f"  {c['name']}: {c['bandwidth_gb_s']:,g} GB/s, {c['bf16_tflops']:,g} TFLOP/s bf16"
            f" dense, {c['memory_gb']:g} GB (datasheet figures; expected.json names each source)"
        )
    expect = "expected" if gpu_lab else "page's"
    notes: list[str] = []
    table: list[tuple[str, ...] | str] = []  # a row's cells, or a step's heading
    for index, row in enumerate(rows):
        if index == 0 or rows[index - 1].step != row.step:
            table.append(f"{row.step}{' (needs a GPU)' if needs[row.step] == 'gpu' else ''}")
        verdict = row.verdict
        if verdict in ("off", "differs") and row.off is not None:
            verdict = f"{verdict} by {row.off:+.0%}"
        if row.note:
            text = NOTES.get(row.note, row.note).replace("{cpu}", e.get("cpu_args") or "")
            notes += [text] if text not in notes else []
            verdict += f" [{notes.index(text) + 1}]"
        entry = entries[row.name]
        unit, factor = shown_unit(entry)
        expected = row.page if row.kind == "exact" else row.expected  # exact: the page's own
        expected = None if row.verdict == "not comparable" else expected
        cells = [cell(v, entry["type"], factor) for v in (row.page, row.theirs, expected)]
        table.append((row.name.split(".", 1)[1][:30], unit, *cells, verdict))
    # each number column as wide as its widest cell (16 at least): a row never shifts
    width = [max([16, *(len(r[i]) for r in table if isinstance(r, tuple))]) for i in (2, 3, 4)]
    head = (
        f"{'value':<30} {'unit':<5} {'page':>{width[0]}} {'yours':>{width[1]}}"
        f" {expect:>{width[2]}}  verdict"
    )
    lines += ["", head, "-" * len(head)]
    for r in table:
        if isinstance(r, str):
            lines.append(r)
            continue
        name, unit, page_cell, yours, expected_cell, verdict = r
        lines.append(
            f"{name:<30} {unit:<5} {page_cell:>{width[0]}} {yours:>{width[1]}}"
            f" {expected_cell:>{width[2]}}  {verdict}"
        )
    lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes, start=1)), ""]
    return "\n".join([*lines, *summary(e, rows)]) + "\n"


def summary(expected: dict[str, Any], rows: Sequence[Row]) -> list[str]:
    """What the table says, in a few sentences."""
    lines: list[str] = []
    differ = [r for r in rows if r.kind == "exact" and r.verdict == "differs"]
    exact = [r for r in rows if r.kind == "exact" and r.verdict in ("agrees", "differs")]
    scaled = [r for r in rows if r.kind in TOLERANCE_KINDS and r.verdict not in NOT_JUDGED]
    cpu = _steps(rows, lambda r: r.verdict == "not comparable")
    not_run = _steps(rows, lambda r: r.verdict == "not run")
    missing = [r.name for r in rows if r.verdict == "missing"]
    if differ:
        lines.append(
            f"{len(differ)} of {len(exact)} values that must match to the byte DIFFER: "
            f"{', '.join(r.name for r in differ)}."
        )
    elif exact:
        lines.append(f"Sizes and counts match the page's to the byte ({_values(len(exact))}).")
    if scaled:
        count = {v: sum(r.verdict == v for r in scaled) for v in ("agrees", "off", "differs")}
        count["no expectation"] = len(scaled) - sum(count.values())
        words = ("agree", "off", "differ", "without one")
        said = ", ".join(f"{n} {w}" for n, w in zip(count.values(), words, strict=True) if n)
        lines.append(f"Scaled to your card ({_values(len(scaled))}): {said}.")
    if cpu:
        lines.append(
            f"Speeds are not comparable on a CPU: {', '.join(cpu)} ran on the CPU. Run them on an"
            f" NVIDIA GPU without `{expected.get('cpu_args') or '--device cpu'}`, then"
            " compare again."
        )
    if missing:
        lines.append(f"Not in your results: {', '.join(missing)}.")
    if not_run:
        lines.append(f"Not run yet (no results file): {', '.join(not_run)}.")
    return lines


def _values(count: int) -> str:
    return f"{count} value{'' if count == 1 else 's'}"


def _steps(rows: Sequence[Row], test: Any) -> list[str]:
    """The steps, in order, with a row that passes the test."""
    return list(dict.fromkeys(r.step for r in rows if test(r)))
