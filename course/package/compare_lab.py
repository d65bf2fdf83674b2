"""Your run of this lab against the page's, value by value, once your GPU is accounted for.

    python3 compare.py                   reads results/*.json here and your GPU (nvidia-smi)
    python3 compare.py --gpu "RTX 4090"  names the card your results came from

../expected.json holds the page's values, how each should move on another card as the lab's
recipe declares it (exact, bandwidth, compute, memory or free), and datasheet figures of common
cards. Exit status 1 when a value that must be exact differs. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

FORMAT = 1
# How far a scaled value may stray from its expectation and still agree: datasheet ratios
# predict speeds only roughly (clocks, kernels and launch overhead differ between cards).
TOLERANCE = {"bandwidth": 0.25, "compute": 0.25, "memory": 0.10}
# a time moves against its resource: half the bandwidth, twice the time
TIME_UNITS = ("ns", "µs", "ms", "s", "min", "h")
BYTES = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
BYTES |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
NOT_JUDGED = ("missing", "not comparable")
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
    "cpu": "Not comparable: this step ran on the CPU (its results say so). The lab's CPU mode"
    " ({cpu}) shrinks the models, so even its sizes differ from the page's on purpose, and its"
    " speeds say nothing about a GPU.",
    "regex": "Not read: the step prints this value and writes it to no file; compare it by eye"
    " with the output START-HERE.md shows.",
}


def find_card(name: str, cards: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The table's row for a GPU name as nvidia-smi prints it ("NVIDIA GeForce RTX 4090")."""
    upper = name.upper()
    for card in cards:
        if all(w in upper for w in card["match"]) and not any(w in upper for w in card["avoid"]):
            return card
    return None


@dataclass(frozen=True)
class Gpu:
    """A machine's GPU: its name, the memory it reports, and its row of the table."""

    name: str
    memory_mib: int | None
    card: dict[str, Any] | None

    @property
    def memory_bytes(self) -> float | None:
        """The card's memory: as reported, else the datasheet's (as GiB, which cards report)."""
        if self.memory_mib:
            return self.memory_mib * 2.0**20
        return self.card["memory_gb"] * 2.0**30 if self.card else None

    def __str__(self) -> str:
        return self.name + (f" ({self.memory_mib:,} MiB)" if self.memory_mib else "")


def page_gpu(expected: dict[str, Any]) -> Gpu | None:
    """The GPU of the page's run."""
    gpu = expected.get("gpu")
    if not gpu:
        return None
    return Gpu(gpu["name"], gpu.get("memory_mib"), find_card(gpu["name"], expected["cards"]))


def detect_gpu(cards: list[dict[str, Any]]) -> Gpu | None:
    """The first GPU nvidia-smi lists, or None without one."""
    query = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    name, _, memory = (out.stdout.strip().splitlines() or [""])[0].rpartition(",")
    mib, name = int(memory) if memory.strip().isdigit() else None, name.strip()
    return Gpu(name, mib, find_card(name, cards)) if name else None


@dataclass
class Observed:
    """One of your values, or why there is none; `device` is what its results file says."""

    value: int | float | str | None
    note: str = ""
    device: str | None = None


@dataclass
class Theirs:
    """Your side: where the values come from, your GPU, your engine versions, your values."""

    source: str
    gpu: Gpu | None
    engine: dict[str, str | None]
    values: dict[str, Observed]


@dataclass
class Row:
    """One value judged: verdict is agrees, off, differs, not judged, not comparable, not read,
    missing or no expectation; `note` a key of NOTES or a sentence; `off` yours / expected - 1."""

    name: str
    step: str
    kind: str
    page: Any
    theirs: Any
    expected: float | None = None
    verdict: str = ""
    note: str = ""
    off: float | None = None


def exact_differs(rows: list[Row]) -> list[Row]:
    """The values that must match to the byte and do not."""
    return [r for r in rows if r.kind == "exact" and r.verdict == "differs"]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ratio(kind: str, page: Gpu | None, gpu: Gpu | None) -> tuple[float | None, str]:
    if gpu is None:
        return None, "no GPU found here: name the card your results came from (--gpu NAME)"
    if gpu.card is None:
        return None, f"'{gpu.name}' is not in expected.json's table of cards (try --gpu NAME)"
    if page is None or page.card is None:
        return None, "the page's GPU is not in the table of cards"
    figure = "bandwidth_gb_s" if kind == "bandwidth" else "bf16_tflops"
    return float(gpu.card[figure]) / float(page.card[figure]), ""


def expectation(
    entry: dict[str, Any],
    page_card: Gpu | None,
    gpu: Gpu | None,
    done: dict[str, tuple[float | None, float | None]],
) -> tuple[float | None, str]:
    """What the page's value should be on your card by its declared scaling, or why unknown;
    `done` holds (expected, page value) of the values before it, for `like`."""
    scales, page = entry["scales"], _number(entry["value"])
    if page is None:
        return None, "a text value"
    if scales["kind"] in ("bandwidth", "compute"):
        ratio, why = _ratio(scales["kind"], page_card, gpu)
        if ratio is None:
            return None, why
        return (page / ratio if entry["unit"] in TIME_UNITS else page * ratio), ""
    if scales.get("like"):
        base, base_page = done.get(scales["like"], (None, None))
        if base is None or not base_page:
            return None, f"{scales['like']} has no expectation"
        return page * base / base_page, ""
    mine = gpu.memory_bytes if gpu else None
    theirs = page_card.memory_bytes if page_card else None
    if mine is None or theirs is None:
        return None, "no GPU memory to scale by (no GPU found here: --gpu NAME)"
    if scales.get("share") is not None:
        return page + scales["share"] * (mine - theirs) / BYTES[entry["unit"]], ""
    return page * mine / theirs, ""


def judge(
    entry: dict[str, Any], mine: Any, expected: float | None
) -> tuple[str, str, float | None]:
    """(verdict, note, relative difference) of one value."""
    kind, page = entry["scales"]["kind"], entry["value"]
    if kind == "exact":
        a, b = _number(page), _number(mine)
        same = page == mine if a is None or b is None else abs(a - b) <= 1e-9 * abs(a)
        off = b / a - 1 if a and b is not None else None
        return ("agrees", "", None) if same else ("differs", "exact", off)
    if kind == "free":
        return "not judged", kind, None
    b = _number(mine)
    if expected is None or b is None:
        return "no expectation", "", None
    if entry["type"] == "int" and abs(b - expected) < 1:  # counts that floor a ratio
        return "agrees", "", 0.0
    off = b / expected - 1 if expected else float("inf")
    if abs(off) <= TOLERANCE[kind]:
        return "agrees", "", off
    return ("off", kind, off) if 0.5 <= b / expected <= 2 else ("differs", "far", off)


def compare(expected: dict[str, Any], theirs: Theirs) -> list[Row]:
    """Judge every value of the page against yours."""
    page = page_gpu(expected)
    needs = {s["id"]: s.get("needs") for s in expected["steps"]}
    done: dict[str, tuple[float | None, float | None]] = {}
    rows: dict[str, Row] = {}
    # a `like` value follows its base's expectation: bases first
    for entry in sorted(expected["values"], key=lambda e: "like" in e["scales"]):
        name, kind = entry["name"], entry["scales"]["kind"]
        seen = theirs.values.get(name) or Observed(None, "not run")
        row = rows[name] = Row(name, entry["step"], kind, entry["value"], seen.value)
        why = ""
        if kind in TOLERANCE:
            row.expected, why = expectation(entry, page, theirs.gpu, done)
            done[name] = (row.expected, _number(entry["value"]))
        if needs.get(entry["step"]) == "gpu" and seen.device not in (None, "cuda"):
            row.verdict, row.note = "not comparable", "cpu"  # even where a key is missing
        elif seen.value is None:
            row.verdict, row.note = "not read" if seen.note == "regex" else "missing", seen.note
        else:
            row.verdict, row.note, row.off = judge(entry, seen.value, row.expected)
            row.note = why if row.verdict == "no expectation" else row.note
    return [rows[e["name"]] for e in expected["values"]]


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value if len(value) <= 15 else value[:14] + "~"
    if kind == "int":  # an expectation of a count is a fraction: 0.9 of a conversation
        return f"{value:.1f}" if abs(value) < 100 and value != int(value) else f"{round(value):,}"
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def _engine_text(engine: dict[str, str | None], page: dict[str, str | None] | None = None) -> str:
    page = page or engine
    return ", ".join(
        f"{n} {v or 'not installed'}" + (f" (the page: {page.get(n)})" if page.get(n) != v else "")
        for n, v in sorted(engine.items())
    )


def render(e: dict[str, Any], t: Theirs, rows: list[Row]) -> str:
    """The table (value, unit, page, yours, expected on your card, verdict), notes, summary."""
    page = page_gpu(e)
    entries = {v["name"]: v for v in e["values"]}
    needs = {s["id"]: s.get("needs") for s in e["steps"]}
    lines = [
        f"{e['title']}: your run against the page's",
        f"  page:  run {e['run']} on {page or 'no GPU'}; {_engine_text(e['engine'])}",
        f"  yours: {t.source} on {t.gpu or 'no GPU'}; {_engine_text(t.engine, e['engine'])}",
    ]
    for c in {g.card["name"]: g.card for g in (page, t.gpu) if g and g.card}.values():
        lines.append(
            f"  {c['name']}: {c['bandwidth_gb_s']:,g} GB/s, {c['bf16_tflops']:,g} TFLOP/s bf16"
            f" dense, {c['memory_gb']:g} GB (datasheet figures; expected.json names each source)"
        )
    head = f"{'value':<30} {'unit':<5} {'page':>16} {'yours':>16} {'expected':>16}  verdict"
    lines += ["", head, "-" * len(head)]
    notes: list[str] = []
    for index, row in enumerate(rows):
        if index == 0 or rows[index - 1].step != row.step:
            lines.append(f"{row.step}{' (needs a GPU)' if needs[row.step] == 'gpu' else ''}")
        verdict = row.verdict
        if verdict in ("off", "differs") and row.off is not None:
            verdict = f"{verdict} by {row.off:+.0%}"
        if row.note:
            text = NOTES.get(row.note, row.note).replace("{cpu}", e.get("cpu_args") or "")
            notes += [text] if text not in notes else []
            verdict += f" [{notes.index(text) + 1}]"
        entry = entries[row.name]
        name = row.name.split(".", 1)[1]
        expected = row.page if row.kind == "exact" else row.expected  # exact: the page's own
        expected = None if row.verdict == "not comparable" else expected
        cells = [_fmt(v, entry["type"]) for v in (row.page, row.theirs, expected)]
        lines.append(
            f"{name[:30]:<30} {entry['unit']:<5} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}"
            f"  {verdict}"
        )
    lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes, start=1)), ""]
    return "\n".join([*lines, *summary(e, rows)]) + "\n"


def summary(expected: dict[str, Any], rows: list[Row]) -> list[str]:
    """What the table says, in a few sentences."""
    lines, differ = [], exact_differs(rows)
    exact = [r for r in rows if r.kind == "exact" and r.verdict in ("agrees", "differs")]
    scaled = [r for r in rows if r.kind in TOLERANCE and r.verdict not in NOT_JUDGED]
    cpu = list(dict.fromkeys(r.step for r in rows if r.verdict == "not comparable"))
    missing = list(dict.fromkeys(r.step for r in rows if r.verdict == "missing"))
    if differ:
        lines.append(
            f"{len(differ)} of {len(exact)} values that must match to the byte DIFFER: "
            f"{', '.join(r.name for r in differ)}."
        )
    elif exact:
        lines.append(f"Sizes and counts match the page's to the byte ({len(exact)} values).")
    if scaled:
        count = {v: sum(r.verdict == v for r in scaled) for v in ("agrees", "off", "differs")}
        count["no expectation"] = len(scaled) - sum(count.values())
        words = ("agree", "off", "differ", "without one")
        said = ", ".join(f"{n} {w}" for n, w in zip(count.values(), words, strict=True) if n)
        lines.append(f"Scaled to your card ({len(scaled)} values): {said}.")
    if cpu:
        lines.append(
            f"Speeds are not comparable on a CPU: {', '.join(cpu)} ran on the CPU. Run them on an"
            f" NVIDIA GPU without `{expected.get('cpu_args') or '--device cpu'}`, then"
            " compare again."
        )
    if missing:
        lines.append(f"Not run here (no results): {', '.join(missing)}.")
    return lines


def _at(data: Any, key: str) -> Any:
    for part in key.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return None if isinstance(data, (dict, list)) else data


def read_outputs(expected: dict[str, Any], lab: Path) -> dict[str, Observed]:
    """Your values, from the JSON files your run wrote where the recorded run's were."""
    found: dict[str, Observed] = {}
    files: dict[str, Any] = {}
    for entry in expected["values"]:
        name, path = entry["name"], entry.get("json")
        if not path:
            found[name] = Observed(None, "regex")
            continue
        if path not in files:
            try:
                files[path] = json.loads((lab / path).read_text(encoding="utf-8"))
            except FileNotFoundError:
                files[path] = f"{path} is not there: run the step first (START-HERE.md)"
            except (OSError, ValueError) as exc:
                files[path] = f"{path} cannot be read: {exc}"
        data = files[path]
        if isinstance(data, str):
            found[name] = Observed(None, data)
            continue
        device = data.get("device") if isinstance(data, dict) else None
        value = _at(data, entry["key"])
        note = "" if value is not None else f"{path} lacks some of the page's keys: an older lab?"
        found[name] = Observed(value, note, device if isinstance(device, str) else None)
    return found


def installed(name: str) -> str | None:
    """The version of a package installed here, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Compare the results in this lab folder with the page's; 1 when an exact value differs."""
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--expected", type=Path, default=here.parent / "expected.json")
    parser.add_argument("--lab", type=Path, default=here, help="where your run wrote results/")
    parser.add_argument("--gpu", help="the card your results came from, e.g. 'RTX 4090'")
    args = parser.parse_args(argv)
    try:
        expected = json.loads(args.expected.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        expected = {"format": str(exc)}
    if expected.get("format") != FORMAT:
        print(f"compare.py: cannot use {args.expected} ({expected.get('format')}, not {FORMAT})")
        return 2
    cards, engine = expected["cards"], {n: installed(n) for n in expected["engine"]}
    gpu = Gpu(args.gpu, None, find_card(args.gpu, cards)) if args.gpu else detect_gpu(cards)
    values = read_outputs(expected, args.lab)
    theirs = Theirs(f"results in {args.lab}", gpu, engine, values)
    rows = compare(expected, theirs)
    sys.stdout.write(render(expected, theirs, rows))
    return 1 if exact_differs(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
