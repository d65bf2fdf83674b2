"""llama-bench's JSON (`-o json`), read back: one entry per test, with its repetitions.

    llama-bench -m FILE -ngl 99 -fa 1 -ctk q8_0 -ctv q8_0 -p 0 -n 64 -d 0,8192 -r 5 -o json

prints a JSON array after any log lines: per test `n_prompt`, `n_gen`, `n_depth` (tokens in the
cache before the timed ones, filled once and restored for each repetition), `type_k`, `type_v`,
`samples_ts` (tokens per second of each repetition), `avg_ts`, `stddev_ts`, `model_size` (the
tensors' bytes), `build_commit`, `build_number`.
"""

from __future__ import annotations

import json
from typing import Any

from labkit.checks import check
from labkit.timing import Spread


def parse(text: str) -> list[dict[str, Any]]:
    """The tests of one llama-bench run's output."""
    start = text.find("[")
    check(start >= 0, "llama-bench printed no JSON array")
    rows = json.loads(text[start:])
    check(isinstance(rows, list) and bool(rows), "llama-bench's JSON holds no results")
    return list(rows)


def speed(row: dict[str, Any]) -> Spread:
    """Tokens per second of one test with its spread over llama-bench's repetitions (-r)."""
    samples = [float(x) for x in row.get("samples_ts") or []]
    return Spread.of(samples or [float(row["avg_ts"])])


def decode_rows(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Decode-only tests (-p 0 -n N) by depth; stops on any other kind of test."""
    out = {}
    for row in rows:
        check(
            row.get("n_prompt", 0) == 0 and row.get("n_gen", 0) > 0,
            "expected decode-only tests (-p 0 -n N)",
        )
        out[int(row.get("n_depth", 0))] = row
    return out
