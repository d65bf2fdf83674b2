"""A page's main-thread work at start-up, in Chromium slowed down, for two or more builds of the
site side by side: what a change to the pages does to the work Lighthouse's mobile score reads.

    .venv/bin/python bench/main_thread.py SITE [SITE ...] [--pages /part-2/gpu-memory/,...]
        [--loads 7] [--rate 8] [--json FILE]

Each SITE is a built site folder (`site/` after `course build`, or a copy built from a change),
served from 127.0.0.1 by the tests' own server (tests/support.py). Every load is a fresh browser
context with a phone's screen (412 × 823 CSS px, as Lighthouse's mobile mode) and the renderer's
CPU slowed `--rate` times by Chromium itself (CDP `Emulation.setCPUThrottlingRate`), traced
with Chromium's `devtools.timeline` categories from the navigation until 3 s (`--settle`) after
the load event.
The sites' loads are interleaved (A B A B ...), so that the machine's own changes of speed, which
move Lighthouse's uncalibrated score by 20 points on a two-core machine, fall on both alike.

Per load it reads from the trace of the page's renderer main thread:
    tasks ms     every top-level task's time (RunTask)
    long ms      the time of the tasks over 50 ms
    blocking ms  Σ (task − 50 ms) over the tasks after the first contentful paint, of a task
                 under way at that paint only what came after it (the total blocking time,
                 without Lighthouse's end at "time to interactive")
    style ms     style recalculation (UpdateLayoutTree)
    layout ms    layout
    script ms    script evaluation, compilation and calls
    parse ms     the HTML parser
and the three longest tasks, each named by what took most of it. The table gives the median and
the quartiles per site and page, and for a second site, each load's difference from the first
site's load beside it (its median and quartiles): a change that moves the median difference
beyond its quartiles is a change, not the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, sync_playwright
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import serving  # noqa: E402 - the tests' static server, on a free local port

CHROMIUM = "/usr/bin/chromium"
PHONE = {"width": 412, "height": 823}
CATEGORIES = [
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "blink.user_timing",
    "loading",
]
LONG_MS = 50.0
KINDS = {
    "style": ("UpdateLayoutTree", "RecalculateStyles"),
    "layout": ("Layout",),
    "script": ("EvaluateScript", "v8.compile", "v8.compileModule", "FunctionCall", "TimerFire",
               "EventDispatch", "FireAnimationFrame", "v8.evaluateModule"),
    "parse": ("ParseHTML",),
}  # fmt: skip


@dataclass
class Load:
    """One traced load of one page of one site."""

    site: str
    page: str
    n: int
    ms: dict[str, float] = field(default_factory=dict)
    longest: list[str] = field(default_factory=list)


def main_thread(events: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The (pid, tid) of the renderer's main thread that loaded the page (the one that parsed
    HTML), or None."""
    names = {
        (e["pid"], e["tid"]): e["args"].get("name")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    parsed = {(e["pid"], e["tid"]) for e in events if e.get("name") == "ParseHTML"}
    found = [key for key in parsed if names.get(key) == "CrRendererMain"]
    return found[0] if found else None


def within(inner: dict[str, Any], outer: dict[str, Any]) -> bool:
    return bool(
        outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )


def self_times(task: dict[str, Any], inside: list[dict[str, Any]]) -> dict[str, float]:
    """Milliseconds of a task spent in each kind of event itself, its nested events taken out
    (a script's forced style recalculation counts as style, not script); scripts by file."""
    spans = sorted(inside, key=lambda e: (e["ts"], -e["dur"]))
    own: dict[int, float] = {id(e): float(e["dur"]) for e in spans}
    stack: list[dict[str, Any]] = []
    outermost = 0.0  # the time of the events the task runs directly
    for event in spans:
        while stack and not within(event, stack[-1]):
            stack.pop()
        if stack:
            own[id(stack[-1])] -= event["dur"]
        else:
            outermost += event["dur"]
        stack.append(event)
    shares: dict[str, float] = {}
    for event in spans:
        name = event["name"]
        for kind, names in KINDS.items():
            if name in names:
                name = kind
        if name == "script":
            data = event.get("args", {}).get("data", {})
            url = data.get("url") or data.get("scriptName") or ""
            name = url.rsplit("/", 1)[-1] if url else "script"
        shares[name] = shares.get(name, 0.0) + max(own[id(event)], 0.0) / 1000
    shares["(the task itself)"] = (task["dur"] - outermost) / 1000
    return shares


def label(task: dict[str, Any], inside: list[dict[str, Any]]) -> str:
    """A long task and the three things it spent most of its time in."""
    shares = self_times(task, inside)
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:3]
    return f"{task['dur'] / 1000:.0f} ms (" + ", ".join(f"{k} {v:.0f}" for k, v in top) + ")"


def read_trace(trace: dict[str, Any], load: Load) -> None:
    """The load's figures from its trace, into `load`."""
    events = trace["traceEvents"]
    main = main_thread(events)
    if main is None:
        raise SystemExit(f"{load.site} {load.page}: no renderer main thread parsed HTML")
    own = [e for e in events if (e["pid"], e["tid"]) == main and e.get("ph") == "X" and "dur" in e]
    tasks = [e for e in own if e["name"] == "RunTask"]
    paints = [e["ts"] for e in events if e.get("name") == "firstContentfulPaint"]
    fcp = min(paints) if paints else tasks[0]["ts"]
    load.ms["tasks"] = sum(t["dur"] for t in tasks) / 1000
    long = [t for t in tasks if t["dur"] / 1000 > LONG_MS]
    load.ms["long"] = sum(t["dur"] for t in long) / 1000
    load.ms["blocking"] = sum(  # of a task under way at the first paint, the part after it
        max(0.0, min(t["dur"] / 1000 - LONG_MS, (t["ts"] + t["dur"] - fcp) / 1000)) for t in long
    )
    for kind, names in KINDS.items():
        chosen = [e for e in own if e["name"] in names]
        if kind == "script":  # the outermost only: calls nest in evaluations and in each other
            chosen.sort(key=lambda e: (e["ts"], -e["dur"]))
            outer: list[dict[str, Any]] = []
            for event in chosen:
                if not outer or not within(event, outer[-1]):
                    outer.append(event)
            chosen = outer
        load.ms[kind] = sum(e["dur"] for e in chosen) / 1000
    for task in sorted(long, key=lambda t: -t["dur"])[:3]:
        inside = [e for e in own if e is not task and within(e, task)]
        load.longest.append(label(task, inside))


def trace_load(browser: Browser, url: str, rate: float, settle_ms: int) -> dict[str, Any]:
    """One load of `url` on a phone's screen, the CPU slowed `rate` times, traced until
    `settle_ms` after the load event."""
    context = browser.new_context(viewport=PHONE, device_scale_factor=1.75, is_mobile=True)
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
        browser.start_tracing(page=page, categories=CATEGORIES)
        page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_timeout(settle_ms)
        data = browser.stop_tracing()
        return dict(json.loads(data))
    finally:
        context.close()


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def cell(values: list[float]) -> str:
    low, mid, high = quartiles(values)
    return f"{mid:,.0f} ({low:,.0f}–{high:,.0f})"


def show(loads: list[Load], sites: list[str], pages: list[str]) -> None:
    console = Console(width=max(Console().width, 160))
    columns = ["tasks", "long", "blocking", "style", "layout", "script", "parse"]
    table = Table(title="Main thread at start-up, ms: median (quartiles) over the loads")
    for name in ("page", "site", *columns):
        table.add_column(name, justify="left" if name in ("page", "site") else "right")
    for page in pages:
        first = [x for x in loads if x.page == page and x.site == sites[0]]
        for site in sites:
            mine = [x for x in loads if x.page == page and x.site == site]
            table.add_row(page, site, *(cell([x.ms[c] for x in mine]) for c in columns))
            if site == sites[0]:
                continue
            paired = list(zip(first, mine, strict=False))
            table.add_row(
                "", "  difference",
                *(cell([b.ms[c] - a.ms[c] for a, b in paired]) for c in columns),
            )  # fmt: skip
    console.print(table)
    for page in pages:
        for site in sites:
            mine = [x for x in loads if x.page == page and x.site == site]
            print(f"{page} {site}: longest tasks per load")
            for x in mine:
                print(f"  {x.n}: " + "; ".join(x.longest))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sites", nargs="+", type=Path, help="built site folders")
    parser.add_argument("--pages", default="/part-2/gpu-memory/,/part-2/kv-cache/")
    parser.add_argument("--loads", type=int, default=7, help="loads per site and page")
    parser.add_argument("--rate", type=float, default=8.0, help="CPU slowdown (8: a slow phone)")
    parser.add_argument("--settle", type=int, default=3000, help="ms traced after the load event")
    parser.add_argument("--json", type=Path, help="write every load's figures to this file")
    args = parser.parse_args()
    missing = [str(s) for s in args.sites if not (s / "index.html").is_file()]
    if missing:
        parser.error(f"not a built site (no index.html): {', '.join(missing)}")
    names = [str(s) for s in args.sites]
    pages = args.pages.split(",")
    loads: list[Load] = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(serving(site)).rstrip("/") for site in args.sites]
        p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        stack.callback(browser.close)
        for url in urls:  # a first load each, not counted
            trace_load(browser, url + pages[0], args.rate, args.settle)
        for n in range(1, args.loads + 1):
            for page in pages:
                for site, url in zip(names, urls, strict=True):
                    load = Load(site, page, n)
                    read_trace(trace_load(browser, url + page, args.rate, args.settle), load)
                    loads.append(load)
                    print(f"{site} {page} {n}: blocking {load.ms['blocking']:.0f} ms", flush=True)
    show(loads, names, pages)
    print(f"{len(loads)} loads at {args.rate:g}× in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([asdict(x) for x in loads], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
