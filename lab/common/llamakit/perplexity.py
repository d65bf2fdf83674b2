"""llama-perplexity's output, read back: perplexity, and the KL divergence against a base run.

    llama-perplexity -m FILE -f text.txt -c 2048 --chunks 4 --kl-divergence-base base.kld
    llama-perplexity -m FILE -c 2048 --chunks 4 -ctk q4_0 -ctv q4_0 -fa on \
        --kl-divergence-base base.kld --kl-divergence

The first run scores the text and saves the log-probabilities of every token it scored (the
second half of each chunk); the second runs the same tokens with another setting and compares
its probabilities with the saved ones, token by token (tools/perplexity/perplexity.cpp). It
prints, among others:

    Final estimate: PPL = 151862.0479 +/- 1234.56789
    Mean PPL(Q)                   : 151900.123456 ±   1234.567890
    Mean    KLD:   0.000123 ±   0.000004
    Maximum KLD:   0.004567
    99.0%   KLD:   0.001234
    Median  KLD:   0.000089
    RMS Δp    :  0.012 ± 0.001 %
    Same top p: 99.876 ±  0.034 %
"""

from __future__ import annotations

import math
import re
from typing import Any

# C's printf writes a NaN as "nan" or "-nan": an uncertainty is the square root of a variance
# that rounding makes slightly negative when the two runs agree exactly (f16 against f16)
NUMBER = r"(-?(?:[\d.]+(?:e[-+]?\d+)?|nan|inf))"
LINES = {
    "ppl": re.compile(rf"Final estimate: PPL = {NUMBER} \+/- {NUMBER}"),
    "ppl_q": re.compile(rf"Mean PPL\(Q\) +: +{NUMBER} ± +{NUMBER}"),
    "ppl_base": re.compile(rf"Mean PPL\(base\) +: +{NUMBER} ± +{NUMBER}"),
    "ln_ppl_ratio": re.compile(rf"Mean ln\(PPL\(Q\)/PPL\(base\)\) +: +{NUMBER} ± +{NUMBER}"),
    "kld_mean": re.compile(rf"Mean +KLD: +{NUMBER} ± +{NUMBER}"),
    "kld_max": re.compile(rf"Maximum KLD: +{NUMBER}"),
    "kld_p99_9": re.compile(rf"99\.9% +KLD: +{NUMBER}"),
    "kld_p99": re.compile(rf"99\.0% +KLD: +{NUMBER}"),
    "kld_p95": re.compile(rf"95\.0% +KLD: +{NUMBER}"),
    "kld_median": re.compile(rf"Median +KLD: +{NUMBER}"),
    "kld_min": re.compile(rf"Minimum KLD: +{NUMBER}"),
    "dp_rms": re.compile(rf"RMS Δp +: +{NUMBER} ± +{NUMBER} %"),
    "same_top": re.compile(rf"Same top p: +{NUMBER} ± +{NUMBER} %"),
}
PERCENT = {"dp_rms", "same_top"}  # printed in percent: kept as fractions
CHUNKS = re.compile(r"(?:computing|calculating perplexity) over (\d+) chunks, n_ctx=(\d+)")


def parse(text: str) -> dict[str, Any]:
    """Every figure of a llama-perplexity run that its output holds (none for a line it lacks):
    each as {"value": v} or, where it prints one, {"value": v, "plus_minus": u}."""
    out: dict[str, Any] = {}
    for name, pattern in LINES.items():
        m = pattern.search(text)
        if m is None:
            continue
        scale = 0.01 if name in PERCENT else 1.0
        value = float(m.group(1)) * scale
        if not math.isfinite(value):
            continue  # a figure it could not compute is as good as a line it lacks
        entry = {"value": value}
        if m.lastindex and m.lastindex > 1 and math.isfinite(unc := float(m.group(2)) * scale):
            entry["plus_minus"] = unc  # left out when not a number (JSON has no NaN)
        out[name] = entry
    if (m := CHUNKS.search(text)) is not None:
        out["chunks"], out["n_ctx"] = int(m.group(1)), int(m.group(2))
    return out


def kld(text: str) -> dict[str, Any]:
    """The KL-divergence figures of a `--kl-divergence` run, or stop saying what is missing."""
    got = parse(text)
    missing = [k for k in ("kld_mean", "kld_max", "kld_p99", "kld_median", "same_top", "ppl_q")
               if k not in got]  # fmt: skip
    if missing:
        raise SystemExit(
            f"llama-perplexity printed no {', '.join(missing)}: run it with --kl-divergence and "
            "--kl-divergence-base FILE written by a base run"
        )
    return got
