"""Lighthouse scores of the published course, served by nginx the ways static hosts serve it.

    .venv/bin/python bench/lighthouse.py [--ways gzip,precompressed] [--modes mobile,desktop]
        [--pages home,kv-cache] [--runs 3] [--json FILE] [--check] [--no-calibrate]

Publishes the site once (`course.publish.pipeline.publish`, for http://127.0.0.1:PORT/, so that
canonical links and the sitemap name the address it is served at), then for each way serves that
one folder with nginx on 127.0.0.1:PORT (`static_host.py`: `gzip`, compressed on the fly;
`precompressed`, the `.gz`/`.br` copies `course publish` wrote; `plain`, for reference) and runs
Lighthouse (from npm, pinned, installed under `.cache/lighthouse/`; Debian's Chromium) on the
landing page and every written lesson of docs/course.yml, in mobile mode (Lighthouse's default:
simulated slow 4G and a 4× slower CPU) and desktop mode. With --runs N each page is run N times
(the runs of one page spread over the way's measurement) and the median run is shown, chosen as
Lighthouse's own `computeMedianRun` does: the run nearest the median FCP and the median TTI; the
performance cell gives the range over the runs.

Calibrated mobile runs (mode `mobile@phone`, on by default with mobile): Lighthouse slows the CPU
by a constant 4×, so its mobile score depends on how fast this machine is at that moment (its
`benchmarkIndex`: 2,717–2,919 when bench/README.md's 99–100 were measured, 1,204–1,764 on a slow
day of the same machine kind). After each mobile run, the same page is run again with the
multiplier that turns the index just measured into one target phone's, TARGET_INDEX (Lighthouse's
docs/throttling.md: "Calibrating the CPU slowdown"): multiplier = index / TARGET_INDEX, never below
1. The table shows both scores, the index and the multiplier; the targets hold for both. A
calibrated run measures the index again at its start: where it moved more than DRIFT from the one
its multiplier came from, the machine changed speed in between, and the run is done again with
the multiplier of its own index (at most REDO times; the redone runs stay in --json, out of the
medians).

The second table says what nginx really sent (from its access log) and what a client asking for
only `br` or only `gzip` gets. Every process the bench starts is ended when it ends; it says how
many a Lighthouse run had left and how many were left at the end. The Lighthouse reports stay in
`.cache/lighthouse/reports/<time>/`.

Needs Debian's chromium, nginx, libnginx-mod-http-brotli-static, nodejs and npm: installed when
missing and running as root (as tests/run.sh does), else it stops with the line to run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the checkout's own package, as on a fresh clone

from rich.console import Console  # noqa: E402 - after the path is set
from rich.table import Table  # noqa: E402
from static_host import (  # noqa: E402 - bench/ is the script's folder, first on the path
    BROTLI_MODULE,
    NGINX,
    WAYS,
    Served,
    end_marked,
    env_for,
    free_port,
    marked,
    probe,
    sent_by_encoding,
    serving,
)

from course.pages.outline import load_outline  # noqa: E402
from course.publish.pipeline import publish, summary  # noqa: E402

LIGHTHOUSE = "12.8.2"
TOOLS = REPO / ".cache" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
CHROME_FLAGS = (
    "--headless=new --no-sandbox --disable-gpu --disable-background-networking "
    "--disable-component-update --disable-sync --no-first-run"
)
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
METRICS = {
    "fcp": "first-contentful-paint",
    "lcp": "largest-contentful-paint",
    "tbt": "total-blocking-time",
    "cls": "cumulative-layout-shift",
    "tti": "interactive",
    "bytes": "total-byte-weight",
}
TIMEOUT = 240
DRIFT = 0.2
"""How far a calibrated run's own benchmark index may be from the one its multiplier came from
(the previous run's) before the run is redone: the machine changed speed in between."""
REDO = 2
"""How many times a calibrated run is redone at most."""
TARGET_INDEX = 700.0
"""The phone a calibrated mobile score means: Lighthouse's default 4× on this machine kind when
bench/README.md's scores were measured (index 2,717–2,919, ÷ 4 ≈ 700), a mid-tier mobile in the
ranges of Lighthouse's docs/throttling.md (125–800)."""


@dataclass
class Run:
    """One Lighthouse run of one page, one mode, one way."""

    way: str
    mode: str
    page: str
    run: int
    report: str
    scores: dict[str, int | None] = field(default_factory=dict)
    """0–100 per category; None where Lighthouse gave no score."""
    metrics: dict[str, float | None] = field(default_factory=dict)
    """Milliseconds (fcp, lcp, tbt, tti), the CLS, bytes transferred; None where missing."""
    benchmark_index: float | None = None
    """Lighthouse's measure of this machine's speed at the time of the run."""
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    left: int = 0
    """Processes of this run still alive half a second after Lighthouse had returned."""
    multiplier: float = 4.0
    """The CPU slowdown Lighthouse simulated (4× unless calibrated)."""
    calibrated_from: float | None = None
    """A calibrated run's: the benchmark index its multiplier was worked out from."""
    redone: bool = False
    """A calibrated run whose own index had moved from `calibrated_from` by more than DRIFT: run
    again with the multiplier of its own index, and left out of the medians."""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.way, self.mode, self.page


def need_tools() -> None:
    """Install the Debian packages the bench needs when missing (as root), else stop."""
    there = {
        "chromium": Path(CHROMIUM).exists(),
        "nginx": Path(NGINX).exists(),
        "libnginx-mod-http-brotli-static": Path(BROTLI_MODULE).exists(),
        "nodejs": shutil.which("node") is not None,
        "npm": shutil.which("npm") is not None,
    }
    missing = [name for name, found in there.items() if not found]
    if not missing:
        return
    line = f"apt-get install -y {' '.join(missing)}"
    if os.geteuid() != 0:
        sys.exit(f"the bench needs Debian packages it lacks; install them with: sudo {line}")
    print(f"installing {' '.join(missing)} (Debian packages)", flush=True)
    subprocess.run(
        f"apt-get update -qq && DEBIAN_FRONTEND=noninteractive {line} -qq >/dev/null",
        shell=True,
        check=True,
    )


def lighthouse_cli() -> Path:
    """Lighthouse's command line, installed from npm under .cache/lighthouse/ when missing."""
    cli = TOOLS / "node_modules" / "lighthouse" / "cli" / "index.js"
    meta = TOOLS / "node_modules" / "lighthouse" / "package.json"
    if meta.is_file() and json.loads(meta.read_text())["version"] == LIGHTHOUSE:
        return cli
    TOOLS.mkdir(parents=True, exist_ok=True)
    (TOOLS / "package.json").write_text('{"name": "course-bench-tools", "private": true}\n')
    print(f"installing lighthouse@{LIGHTHOUSE} from npm into {TOOLS}", flush=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--save-exact", f"lighthouse@{LIGHTHOUSE}"],
        cwd=TOOLS,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return cli


def calibrated(index: float | None, target: float = TARGET_INDEX) -> float | None:
    """The CPU slowdown that makes a machine of benchmark `index` the target phone; None when
    Lighthouse measured no index."""
    return None if not index else max(1.0, round(index / target, 2))


def lighthouse(
    cli: Path, url: str, mode: str, report: Path, tmp: Path, multiplier: float | None = None
) -> tuple[str | None, int]:
    """Run Lighthouse once into `report`; (what went wrong or None, processes it left alive)."""
    command = ["node", str(cli), url, "--quiet", "--output=json", f"--output-path={report}"]
    command.append(f"--chrome-flags={CHROME_FLAGS}")
    if mode == "desktop":
        command.append("--preset=desktop")
    if multiplier is not None:
        command.append(f"--throttling.cpuSlowdownMultiplier={multiplier}")
    error = None
    try:
        done = subprocess.run(
            command,
            env=env_for("lighthouse", tmp, CHROME_PATH=CHROMIUM),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            start_new_session=True,
        )
        if done.returncode != 0 or not report.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            error = f"lighthouse exited {done.returncode}: " + " | ".join(tail)
    except subprocess.TimeoutExpired:
        error = f"lighthouse took over {TIMEOUT} s"
    time.sleep(0.5)  # Chromium's last processes end a moment after Lighthouse has closed it
    left = len(marked("lighthouse"))
    end_marked("lighthouse")
    return error, left


def read_report(run: Run) -> None:
    """The scores and metrics of the run's Lighthouse JSON report, into `run`."""
    data = json.loads(Path(run.report).read_text())
    for name in CATEGORIES:
        score = data["categories"][name]["score"]
        run.scores[name] = None if score is None else round(100 * score)
    for key, audit in METRICS.items():
        value = data["audits"][audit].get("numericValue")
        run.metrics[key] = None if value is None else float(value)
    run.benchmark_index = data.get("environment", {}).get("benchmarkIndex")
    run.warnings = [str(w) for w in data.get("runWarnings", [])]
    if data.get("runtimeError"):
        run.error = str(data["runtimeError"].get("message", "runtime error"))


def median_run(runs: list[Run]) -> Run:
    """The run nearest the median FCP and TTI, ties to the lower TTI (Lighthouse's own rule)."""
    timed = [(r, r.metrics.get("fcp"), r.metrics.get("tti")) for r in runs if not r.error]
    valid = [(r, f, t) for r, f, t in timed if f is not None and t is not None]
    if not valid:
        return runs[0]
    fcp = statistics.median(f for _, f, _ in valid)
    tti = statistics.median(t for _, _, t in valid)
    return min(valid, key=lambda v: ((fcp - v[1]) ** 2 + (tti - v[2]) ** 2, v[2]))[0]


def fmt(value: float | None, scale: float, spec: str) -> str:
    """A metric for the table: scaled and formatted; '-' where missing."""
    return "-" if value is None or not math.isfinite(value) else format(value / scale, spec)


def failures(best: Run) -> list[str]:
    """What keeps a median run from the issue's targets: mobile performance ≥ 95; accessibility,
    best practices and SEO 100; LCP ≤ 2.0 s and TBT ≤ 150 ms."""
    where = f"{best.way} {best.mode} {best.page}"
    if best.error:
        return [f"{where}: {best.error}"]
    found = []
    if best.mode.startswith("mobile") and (best.scores["performance"] or 0) < 95:
        found.append(f"{where}: performance {best.scores['performance']} < 95")
    for name in CATEGORIES[1:]:
        if best.scores[name] != 100:
            found.append(f"{where}: {name} {best.scores[name]} < 100")
    lcp, tbt = best.metrics["lcp"], best.metrics["tbt"]
    if lcp is None or lcp > 2000:
        found.append(f"{where}: LCP {fmt(lcp, 1000, '.2f')} s > 2.0 s")
    if tbt is None or tbt > 150:
        found.append(f"{where}: TBT {fmt(tbt, 1, '.0f')} ms > 150 ms")
    return found


def show(medians: list[Run], runs: list[Run], served: dict[str, Served]) -> None:
    """The scores table and the encodings table."""
    console = Console(width=max(Console().width, 150))
    table = Table(title="Lighthouse, median run per page (performance: the range over the runs)")
    for name in ("way", "mode", "page"):
        table.add_column(name)
    for name in ("perf", "a11y", "best pr.", "SEO", "FCP s", "LCP s", "TBT ms", "CLS", "bytes"):
        table.add_column(name, justify="right")
    for name in ("index", "CPU ×"):
        table.add_column(name, justify="right")
    for best in medians:
        if best.error:
            table.add_row(*best.key, "failed: " + best.error[:80])
            continue
        perf = [r.scores.get("performance") for r in runs if r.key == best.key and not r.error]
        spread = [p for p in perf if p is not None]
        cell = str(best.scores["performance"])
        if len(spread) > 1:
            cell += f" ({min(spread)}–{max(spread)})"
        m = best.metrics
        table.add_row(
            *best.key,
            cell,
            *(str(best.scores[name]) for name in CATEGORIES[1:]),
            fmt(m["fcp"], 1000, ".2f"),
            fmt(m["lcp"], 1000, ".2f"),
            fmt(m["tbt"], 1, ".0f"),
            fmt(m["cls"], 1, ".3f"),
            fmt(m["bytes"], 1, ",.0f"),
            fmt(best.benchmark_index, 1, ".0f")
            + (f"\n(set {best.calibrated_from:.0f})" if best.calibrated_from else ""),
            f"{best.multiplier:g}",
        )
    console.print(table)
    coded = Table(title="What nginx sent the browser (200 responses of every run)")
    columns = ("way", "browser asked", "sent", "files sent uncompressed", "client asking br / gzip")
    for name in columns:
        coded.add_column(name)
    for way, facts in served.items():
        coded.add_row(
            way,
            " | ".join(facts.accept_encoding),
            "\n".join(f"{c}: {n} ({b:,} B)" for c, (n, b) in sorted(facts.sent.items())),
            plain_by_suffix(facts),
            " / ".join(f"gets {got}" for got in facts.probe.values()),
        )
    console.print(coded)


def plain_by_suffix(facts: Served) -> str:
    """'.map 1, .png 1, .txt 1': the files sent uncompressed, by kind, and how many of them are
    text files that `course publish` gives copies (none, when a way compresses all it should)."""
    kinds = Counter(Path(uri).suffix or uri for uri in facts.sent_plain)
    line = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    text = len(facts.text_sent_plain)
    return f"{line or 'none'}\n({text} text file{'s' * (text != 1)} ≥ 1 KiB among them)"


def phone_runs(
    args: argparse.Namespace, cli: Path, run: Run, url: str, reports: Path, tmp: Path, name: str
) -> list[Run]:
    """The calibrated runs after mobile run `run`: one with the multiplier of `run`'s index, and
    again (at most REDO times) while a run's own index is more than DRIFT from the one its
    multiplier came from."""
    done: list[Run] = []
    source = run.benchmark_index
    m = calibrated(source, args.target_index)
    for attempt in range(REDO + 1):
        if source is None or m is None:
            break
        suffix = f"-redo{attempt}" if attempt else ""
        report = reports / f"{run.way}-phone-{name}-{run.run}{suffix}.json"
        phone = Run(run.way, "mobile@phone", run.page, run.run, str(report))
        phone.multiplier, phone.calibrated_from = m, source
        phone.error, phone.left = lighthouse(cli, url, "mobile", report, tmp, m)
        if report.is_file():
            read_report(phone)
        done.append(phone)
        said = phone.error or phone.scores
        print(f"{run.way} phone ({m:g}×) {run.page} run {run.run}: {said}", flush=True)
        own = phone.benchmark_index
        if phone.error or not own or abs(own / source - 1) <= DRIFT or attempt == REDO:
            break
        phone.redone = True
        print(f"  its index was {own:.0f}, not {source:.0f}: run again at the new multiplier")
        source, m = own, calibrated(own, args.target_index)
    return done


def measure(
    args: argparse.Namespace, pages: dict[str, str], reports: Path
) -> tuple[list[Run], dict[str, Served]]:
    """Publish once, then serve each way and run Lighthouse on every page and mode."""
    runs: list[Run] = []
    served: dict[str, Served] = {}
    cli = lighthouse_cli()
    with tempfile.TemporaryDirectory(prefix="lighthouse-bench-") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        done = publish(REPO, f"http://127.0.0.1:{port}/", to=tmp / "site")
        print("\n".join(summary(done)[:2]), flush=True)
        site = Path(done.where)
        try:
            for way in args.ways:
                with serving(site, port, way, tmp / f"nginx-{way}") as log:
                    asked = probe(port)
                    for n in range(1, args.runs + 1):
                        for name, path in pages.items():
                            for mode in args.modes:
                                report = reports / f"{way}-{mode}-{name}-{n}.json"
                                run = Run(way, mode, path, n, str(report))
                                url = f"http://127.0.0.1:{port}{path}"
                                run.error, run.left = lighthouse(cli, url, mode, report, tmp)
                                if report.is_file():
                                    read_report(run)
                                runs.append(run)
                                said = run.error or run.scores
                                print(f"{way} {mode} {path} run {n}: {said}", flush=True)
                                if mode == "mobile" and args.calibrate:
                                    runs += phone_runs(args, cli, run, url, reports, tmp, name)
                served[way] = sent_by_encoding(log, site)
                served[way].probe = asked
        finally:
            end_marked()
    return runs, served


def main() -> int:
    """Publish, serve, measure, print; 1 with --check when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ways", default="gzip,precompressed", help="of: " + ", ".join(WAYS))
    parser.add_argument("--modes", default="mobile,desktop", help="of: mobile, desktop")
    parser.add_argument("--pages", help="'home' and lesson ids (default: home and every lesson)")
    parser.add_argument("--runs", type=int, default=1, help="runs per page; the median is shown")
    parser.add_argument("--json", type=Path, help="write every run's numbers to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets are met")
    parser.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="no second mobile run with the CPU slowdown calibrated to the target phone",
    )
    parser.add_argument(
        "--target-index",
        type=float,
        default=TARGET_INDEX,
        help=f"the calibrated runs' phone (default {TARGET_INDEX:g}); 385 is the default 4x on"
        " this machine kind at a slow moment (index 1,540)",
    )
    args = parser.parse_args()
    args.ways, args.modes = args.ways.split(","), args.modes.split(",")
    lessons = load_outline(REPO / "docs").written
    every = {"home": "/", **{lesson.id: "/" + lesson.url for lesson in lessons}}
    chosen = args.pages.split(",") if args.pages else list(every)
    unknown = [
        *(w for w in args.ways if w not in WAYS),
        *(m for m in args.modes if m not in ("mobile", "desktop")),
        *(p for p in chosen if p not in every),
    ]
    if unknown or args.runs < 1:
        parser.error(f"unknown {', '.join(unknown) or '--runs'} (pages: {', '.join(every)})")
    # SIGTERM unwinds like Ctrl-C, through the clean-up of nginx, Lighthouse and Chromium
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    need_tools()
    reports = TOOLS / "reports" / time.strftime("%Y%m%dT%H%M%S")
    reports.mkdir(parents=True)
    runs, served = measure(args, {name: every[name] for name in chosen}, reports)
    seconds = time.monotonic() - started
    kept = [r for r in runs if not r.redone]
    keys = list(dict.fromkeys(r.key for r in kept))
    medians = [median_run([r for r in kept if r.key == key]) for key in keys]
    show(medians, kept, served)
    for line in sorted({w for r in runs for w in r.warnings}):
        print(f"Lighthouse warned: {line}")
    index = [r.benchmark_index for r in runs if r.benchmark_index is not None]
    if index:
        print(f"Lighthouse's benchmark index of this machine: {min(index):.0f}–{max(index):.0f}")
        print(f"the target phone's index: {args.target_index:.0f} (mobile@phone rows)")
    redone = [r for r in runs if r.redone]
    if args.calibrate:
        print(
            f"calibrated runs redone because the machine's index moved more than {DRIFT:.0%} "
            f"from the run before: {len(redone)}"
            + "".join(f"\n  {r.page} run {r.run}: {r.calibrated_from:.0f} → {r.benchmark_index:.0f}"
                      for r in redone)
        )  # fmt: skip
    print(f"reports: {reports}")
    print(
        f"{len(runs)} Lighthouse runs; the bench took {seconds:.0f} s; processes left: "
        f"{sum(r.left for r in runs)} after the runs, {len(marked())} after the bench"
    )
    missed = [line for best in medians for line in failures(best)]
    if args.json:
        record = {
            "lighthouse": LIGHTHOUSE,
            "target_index": args.target_index,
            "seconds": round(seconds, 1),
            "runs": [asdict(r) for r in runs],
            "medians": [asdict(r) for r in medians],
            "served": {way: asdict(facts) for way, facts in served.items()},
            "missed": missed,
        }
        args.json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if args.check:
        print("\n".join(["targets missed:", *missed]) if missed else "every target met")
        return 1 if missed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
