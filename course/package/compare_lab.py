"""Your run of this lab against the page's, value by value, once your GPU is accounted for.

    python3 compare.py                   reads results/*.json here and your GPU (nvidia-smi)
    python3 compare.py --gpu "RTX 4090"  names the card your results came from
    python3 compare.py --json mine.json  also writes the comparison as JSON, which the lesson
                                         page's calculator plots beside the page's values

../expected.json holds the page's values, how each should move on another card as the lab's
recipe declares it (exact, bandwidth, compute, memory or free), and datasheet figures of common
cards; compare_report.py beside this file writes the table. Exit status 1 when a value that
must be exact differs. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__:  # inside the course's package
    from .compare_report import render, uses_gpu
else:  # the lesson zip's lab/compare.py, beside lab/compare_report.py (even under python -I)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compare_report import render, uses_gpu  # type: ignore[import-not-found,no-redef]

FORMAT = 1
# How far a scaled value may stray from its expectation and still agree: datasheet ratios
# predict speeds only roughly (clocks, kernels and launch overhead differ between cards).
TOLERANCE = {"bandwidth": 0.25, "compute": 0.25, "memory": 0.10}
# a time moves against its resource: half the bandwidth, twice the time
TIME_UNITS = ("ns", "µs", "ms", "s", "min", "h")
BYTES = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
BYTES |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


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
    """One of your values, or why there is none (`note`: a key of the report's NOTES or a
    sentence); `device` and `tiny` are what its results file says of the run."""

    value: int | float | str | None
    note: str = ""
    device: str | None = None
    tiny: bool | None = None
    ran: bool = True
    """False when the step's results file is not there: the step has not run here."""


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
        seen = theirs.values.get(name) or Observed(None, "not run", ran=False)
        row = rows[name] = Row(name, entry["step"], kind, entry["value"], seen.value)
        why = ""
        if kind in TOLERANCE:
            row.expected, why = expectation(entry, page, theirs.gpu, done)
            done[name] = (row.expected, _number(entry["value"]))
        on_cpu = seen.device not in (None, "cuda")
        if not seen.ran:
            row.verdict, row.note = "not run", seen.note
        elif seen.tiny:  # the lab's CPU mode shrank the models: nothing is the page's
            row.verdict, row.note = "not comparable", "tiny"
        elif on_cpu and needs.get(entry["step"]) == "gpu" and seen.tiny is None:
            row.verdict, row.note = "not comparable", "cpu"  # results that do not say --tiny
        elif on_cpu and kind in TOLERANCE:
            row.verdict, row.note = "not comparable", "cpu-speed"
        elif seen.value is None:
            verdicts = {"regex": "not read", "null": "not measured"}
            row.verdict, row.note = verdicts.get(seen.note, "missing"), seen.note
        else:
            row.verdict, row.note, row.off = judge(entry, seen.value, row.expected)
            row.note = why if row.verdict == "no expectation" else row.note
            row.note = "undeclared" if entry.get("undeclared") else row.note
    return [rows[e["name"]] for e in expected["values"]]


MISSING = object()
"""What `_at` gives for a key the file does not have (None is a key that holds null)."""


def _at(data: Any, key: str) -> Any:
    for part in key.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return MISSING
    if isinstance(data, dict) and "median" in data:  # a timed value with its spread
        return data["median"]
    return MISSING if isinstance(data, (dict, list)) else data


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
                files[path] = None
            except (OSError, ValueError) as exc:
                files[path] = f"{path} cannot be read: {exc}"
        data = files[path]
        if data is None:
            found[name] = Observed(None, f"{path} is not there: run the step first", ran=False)
            continue
        if isinstance(data, str):
            found[name] = Observed(None, data)
            continue
        device = data.get("device") if isinstance(data, dict) else None
        tiny = data.get("tiny") if isinstance(data, dict) else None
        value = _at(data, entry["key"])
        note = "null" if value is None else ""
        if value is MISSING:
            value, note = None, f"{path} has no `{entry['key']}` (a part the step left out on"
            note += " this machine, or another version of the lab)"
        found[name] = Observed(
            value,
            note,
            device if isinstance(device, str) else None,
            tiny if isinstance(tiny, bool) else None,
        )
    return found


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def as_json(expected: dict[str, Any], theirs: Theirs, rows: list[Row]) -> dict[str, Any]:
    """What --json writes: the page's run and GPU, yours, and every value judged, each with the
    page's value, yours and what the page's would be on your card (for the lesson page's
    calculator, which plots yours beside the page's)."""
    units = {e["name"]: e["unit"] for e in expected["values"]}
    gpu = theirs.gpu
    card = gpu.card["name"] if gpu and gpu.card else None
    values = []
    for r in rows:
        values.append(
            {"name": r.name, "step": r.step, "kind": r.kind, "unit": units.get(r.name),
             "verdict": r.verdict, "note": r.note}
            | {k: _finite(getattr(r, k)) for k in ("page", "theirs", "expected", "off")}
        )  # fmt: skip
    return {
        "kind": "course-compare",
        "format": FORMAT,
        "lesson": expected["lesson"],
        "page_run": expected["run"],
        "page_gpu": expected.get("gpu"),
        "gpu": {"name": gpu.name, "memory_mib": gpu.memory_mib, "card": card} if gpu else None,
        "source": theirs.source,
        "engine": theirs.engine,
        "values": values,
    }


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
    parser.add_argument("--json", type=Path, help="also write the comparison to this JSON file")
    args = parser.parse_args(argv)
    try:
        expected = json.loads(args.expected.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        expected = {"format": str(exc)}
    if expected.get("format") != FORMAT:
        print(f"compare.py: cannot use {args.expected} ({expected.get('format')}, not {FORMAT})")
        return 2
    cards, engine = expected["cards"], {n: installed(n) for n in expected["engine"]}
    gpu = Gpu(args.gpu, None, find_card(args.gpu, cards)) if args.gpu else None
    gpu = gpu or (detect_gpu(cards) if uses_gpu(expected) else None)
    values = read_outputs(expected, args.lab)
    theirs = Theirs(f"results in {args.lab}", gpu, engine, values)
    rows = compare(expected, theirs)
    sys.stdout.write(render(expected, theirs, rows, page_gpu(expected)))
    if args.json:
        text = json.dumps(as_json(expected, theirs, rows), indent=2, sort_keys=True)
        args.json.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.json}: give it to the calculator on the lesson's page")
    return 1 if exact_differs(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
