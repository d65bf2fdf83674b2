"""Page facts, computed and never typed: reading time, hands-on time, cost, provenance, downloads.

reading time   words of prose (code and terminal output left out) at 200 words a minute
hands-on time  the record's step seconds + lab.yml's setup.install_seconds + download_seconds
cost           hands-on hours × each price per hour of the record's GPU, from the course's facts
               (lab/common/labkit/facts.toml: cards.<card>.prices, found by the card's name)
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..lab.facts import FACTS_FILE, Price, load_facts
from ..lab.load import LoadedLab
from ..record.models import Run
from .format import day, duration, minutes_text, money

WORDS_PER_MINUTE = 200
# fences may be indented (a listing inside an admonition)
_CODE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1\s*$", re.MULTILINE | re.DOTALL)
_PRE = re.compile(r"<pre\b.*?</pre>", re.DOTALL | re.IGNORECASE)
_HIDDEN = re.compile(r"<(script|style)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[A-Za-z0-9][\w'’.,-]*")


class Prices(BaseModel):
    """Prices per GPU name, as the record's host.gpu.name spells it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: dict[str, list[Price]]


def load_prices(root: Path) -> Prices:
    """The prices of every card in the course's facts, by the name nvidia-smi gives the card
    (none when the project has no facts file); FactsError naming the key of a wrong one."""
    if not (root / FACTS_FILE).is_file():
        return Prices(gpus={})
    cards = load_facts(root).cards.values()
    return Prices(gpus={c.name: list(c.prices.values()) for c in cards if c.prices})


def prose_words(markdown: str) -> int:
    """Words a reader reads: fenced code, <pre> blocks, scripts and tags left out."""
    text = _CODE.sub(" ", markdown)
    text = _PRE.sub(" ", text)
    text = _HIDDEN.sub(" ", text)
    text = _TAG.sub(" ", text)
    return len(_WORD.findall(text))


def reading_minutes(words: int) -> int:
    """Minutes to read that many words, rounded up, at least one."""
    return max(1, math.ceil(words / WORDS_PER_MINUTE))


TYPING_SECONDS_PER_STEP = 60.0
"""What a learner spends on each step besides the machine's time: reading what it does, typing
its command, reading its output (one minute a step, a rounded guess stated on the page)."""


def typing_seconds(lab: LoadedLab | None) -> float:
    """The reading-and-typing allowance of a lab: one minute for each of its steps."""
    return TYPING_SECONDS_PER_STEP * len(lab.lab.steps) if lab is not None else 0.0


def hands_on_seconds(run: Run, lab: LoadedLab | None) -> tuple[float, float, float]:
    """(steps, installs, downloads) in seconds: recorded step time plus the lab's declared
    set-up.
    """
    steps = sum(s.seconds or 0.0 for s in run.record.steps)
    if lab is None:
        return steps, 0.0, 0.0
    return steps, lab.lab.setup.install_seconds, lab.lab.setup.download_seconds


def gpu_name(run: Run) -> str | None:
    """The GPU the run used, as recorded (host.gpu.name), or None for a run without one."""
    gpu = run.record.host.gpu
    if gpu is None or not gpu.name:
        return None
    return gpu.name if gpu.count == 1 else f"{gpu.count} × {gpu.name}"


def gpu_steps(lab: LoadedLab | None) -> list[str]:
    """The ids of the lab's steps that say `needs: gpu`."""
    return [s.id for s in lab.lab.steps if s.needs == "gpu"] if lab is not None else []


def machine_text(run: Run, lab: LoadedLab | None) -> str:
    """The machine the lab needs, in words: the GPU its run was recorded on, or any machine."""
    gpu = gpu_name(run)
    if gpu is not None:
        return gpu
    needing = gpu_steps(lab)
    if not needing:
        return "any machine: no step of the lab needs a GPU"
    # a run without a GPU whose GPU steps were reused from an earlier run on one
    return f"no GPU recorded (steps {', '.join(needing)} need one; their results were reused)"


def hands_on_text(steps: float, install: float, download: float, typing: float = 0.0) -> str:
    """'about 13 min: the recorded steps took 1 min 36 s, plus 4 min of installs, 5 min of
    downloads and 2 min to read and type each step (a minute a step)'; parts that take no time
    are left out."""
    total = minutes_text(steps + install + download + typing)
    text = f"{total}: the recorded steps took {duration(steps)}"
    extra = [
        f"{minutes_text(seconds).removeprefix('about ')} {what}"
        for seconds, what in (
            (install, "of installs"),
            (download, "of downloads"),
            (typing, "to read and type each step (a minute a step)"),
        )
        if seconds > 0
    ]
    if extra:
        text += ", plus " + ", ".join(extra[:-1]) + (" and " if len(extra) > 1 else "") + extra[-1]
    return text


def cost_text(prices: Prices, gpu: str | None, seconds: float) -> tuple[str, list[Price]]:
    """The GPU's price per hour and the lab's cost at it, as a range where there are several."""
    if gpu is None:
        return "no GPU to rent", []
    base = gpu.split(" × ")[-1]
    count = int(gpu.split(" × ")[0]) if " × " in gpu else 1
    found = prices.gpus.get(base, [])
    if not found:
        return f"no price on file for {base} (add one to {FACTS_FILE}, cards.<card>.prices)", []
    currency = found[0].currency
    rates = sorted(p.per_hour * count for p in found if p.currency == currency)
    hours = seconds / 3600
    if len(rates) == 1 or rates[0] == rates[-1]:
        rate = f"{money(rates[0], currency)} per hour"
        cost = money(rates[0] * hours, currency)
    else:
        rate = f"{money(rates[0], currency)}–{money(rates[-1], currency)} per hour"
        cost = f"{money(rates[0] * hours, currency)}–{money(rates[-1] * hours, currency)}"
    return f"{rate}, so the hands-on part costs {cost}", found


def cost_range(prices: Prices, gpu: str | None, seconds: float) -> str | None:
    """The cost of `seconds` on the GPU at its prices, '$0.21' or '$0.21–$0.27'; None when the
    run used no GPU or no price is on file."""
    if gpu is None:
        return None
    count = int(gpu.split(" × ")[0]) if " × " in gpu else 1
    found = prices.gpus.get(gpu.split(" × ")[-1], [])
    if not found:
        return None
    currency = found[0].currency
    rates = sorted(p.per_hour * count for p in found if p.currency == currency)
    low, high = (money(r * seconds / 3600, currency) for r in (rates[0], rates[-1]))
    return low if low == high else f"{low}–{high}"


def checked_on(run: Run) -> str:
    """'29 November 2026' from the run's start time."""
    return day(run.record.started)


def engine_text(run: Run) -> str:
    """The engine packages and versions as recorded, or a line saying there were none."""
    parts = [
        f"{name} {version or '(not installed)'}"
        for name, version in sorted(run.record.engine.items())
    ]
    return ", ".join(parts) if parts else "no engine packages"


def fact_row(label: str, value: str) -> str:
    """One fact of the page header."""
    return f"<div><dt>{html.escape(label)}</dt><dd>{value}</dd></div>"
