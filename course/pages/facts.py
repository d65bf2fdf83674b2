"""Page facts, computed and never typed: reading time, hands-on time, cost, provenance, downloads.

reading time   words of prose (code and terminal output left out) at 200 words a minute
hands-on time  the record's step seconds + its builds' (llama.cpp) + lab.yml's
               setup.install_seconds + download_seconds + a minute a step to read and type
GPU memory     the largest recorded peak of a GPU step that does not size itself to the card
cost           hands-on hours × each price per hour of the card a learner rents for the lab (an
               RTX 4090 where the lab fits it, else the recorded GPU), from `card_prices`: the
               course's facts (lab/common/labkit/facts.toml: cards.<card>.prices)
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..lab.facts import FACTS_FILE, Price, load_facts
from ..lab.load import LoadedLab
from ..record.models import Run, Value, build_step_id
from ..record.units import convert
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


@dataclass(frozen=True)
class HandsOn:
    """What a learner spends on a lab's hands-on part, in seconds, by what it is spent on."""

    steps: float
    """The recorded steps' time."""
    installs: float
    """lab.yml's `setup.install_seconds` (declared, not measured)."""
    downloads: float
    """lab.yml's `setup.download_seconds` (declared)."""
    builds: float
    """Building the lab's native engines (llama.cpp), as the record's build steps timed it."""
    typing: float
    """The reading-and-typing allowance: a minute a step."""

    @property
    def total(self) -> float:
        """All of it."""
        return self.steps + self.installs + self.downloads + self.builds + self.typing


def hands_on(run: Run, lab: LoadedLab | None) -> HandsOn:
    """The hands-on time of a lab: recorded steps and builds, declared set-up, typing."""
    steps = sum(s.seconds or 0.0 for s in run.record.steps if s.kind != "build")
    builds = sum(build_seconds(run, name) or 0.0 for name in (lab.lab.builds if lab else {}))
    if lab is None:
        return HandsOn(steps, 0.0, 0.0, builds, 0.0)
    setup = lab.lab.setup
    return HandsOn(
        steps, setup.install_seconds, setup.download_seconds, builds, typing_seconds(lab)
    )


def build_seconds(run: Run, name: str) -> float | None:
    """How long building `name` took where the run was recorded (the build step's
    `build_seconds`, which stays the first build's when later runs reuse it); None unknown."""
    found = next((s for s in run.record.steps if s.id == build_step_id(name)), None)
    took = found.values.get("build_seconds") if found else None
    if took is None or isinstance(took.value, str):
        return found.seconds if found and found.seconds else None
    return float(took.value)


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


def hands_on_text(spent: HandsOn, build_names: list[str] | None = None) -> str:
    """'about 13 min: the recorded steps took 1 min 36 s, plus 5 min to build llama.cpp, 4 min of
    installs, 5 min of downloads and 2 min to read and type each step (a minute a step)'; parts
    that take no time are left out."""
    total = minutes_text(spent.total)
    text = f"{total}: the recorded steps took {duration(spent.steps)}"
    built = " and ".join(build_names or []) or "the lab's engines"
    extra = [
        f"{minutes_text(seconds).removeprefix('about ')} {what}"
        for seconds, what in (
            (spent.builds, f"to build {built}"),
            (spent.installs, "of installs"),
            (spent.downloads, "of downloads"),
            (spent.typing, "to read and type each step (a minute a step)"),
        )
        if seconds > 0
    ]
    if extra:
        text += ", plus " + ", ".join(extra[:-1]) + (" and " if len(extra) > 1 else "") + extra[-1]
    return text


def step_peak(values: dict[str, Value]) -> float | None:
    """A step's peak GPU memory in bytes from its recorded `peak_gpu_memory` values (the
    reserved figure when there is one: what the GPU had to hand over); None without one."""
    found = values.get("peak_gpu_memory_reserved") or values.get("peak_gpu_memory")
    if found is None or found.unit != "B" or isinstance(found.value, str) or not found.value:
        return None
    return float(found.value)


@dataclass(frozen=True)
class GpuNeed:
    """What a lab needs of a GPU, from its recorded peaks."""

    peak: float | None
    """The largest peak (bytes) of a GPU step that does not size itself to the card."""
    step: str | None
    """The step of that peak."""
    sized: list[tuple[str, float]]
    """(step, peak) of the steps that size themselves to the card: their peaks follow it."""


def gpu_need(run: Run, lab: LoadedLab | None) -> GpuNeed:
    """The GPU memory a lab needs: the largest recorded peak of its fixed GPU steps, and the
    steps whose peaks are a share of whatever card they ran on (`sizes_to_card: true`)."""
    if lab is None:
        return GpuNeed(None, None, [])
    recorded = {s.id: s for s in run.record.steps}
    fixed: list[tuple[float, str]] = []
    sized: list[tuple[str, float]] = []
    for step in lab.lab.steps:
        rec = recorded.get(step.id)
        peak = step_peak(rec.values) if rec and step.needs == "gpu" else None
        if peak is None:
            continue
        if step.sizes_to_card:
            sized.append((step.id, peak))
        else:
            fixed.append((peak, step.id))
    top = max(fixed) if fixed else None
    return GpuNeed(top[0] if top else None, top[1] if top else None, sized)


RENTED_CARD = "NVIDIA GeForce RTX 4090"
"""The card a learner rents for a lab that fits it (every lab of the course fits a 24 GB card):
its prices price the hands-on part, the recorded GPU stays the card the numbers come from. Its
memory and prices are the course's facts (`card_bytes`, `card_prices`)."""
OFFER_WORDS = {
    "community": "community cloud: GPUs of hosts RunPod has vetted, the cheaper offer",
    "secure": "secure cloud: GPUs in data centres of RunPod's partners, with stronger reliability"
    " and security guarantees",
}
"""What the words of a price's offer mean, said once beside the prices."""


def card_prices(root: Path, gpu: str) -> list[Price]:
    """The dated prices of one GPU (as a record names it: 'NVIDIA GeForce RTX 4090'): the one
    place pages read prices from."""
    return list(load_prices(root).gpus.get(gpu, []))


def card_bytes(root: Path, gpu: str) -> float | None:
    """A card's memory as PyTorch sees it (torch.cuda.mem_get_info()'s total, what a step's
    peak must fit), in bytes, from the course's facts; None when they do not say."""
    if not (root / FACTS_FILE).is_file():
        return None
    card = load_facts(root).card_named(gpu)
    total = card.torch_total if card else None
    return convert(float(total.value), total.unit, "B") if total else None


def rented_card(root: Path, run: Run, lab: LoadedLab | None) -> str | None:
    """The card to price a lab's hands-on part on: the RTX 4090 unless a fixed GPU step's
    recorded peak does not fit its memory (then the recorded GPU); None for a lab without GPU
    steps."""
    if not gpu_steps(lab):
        return None
    need, room = gpu_need(run, lab), card_bytes(root, RENTED_CARD)
    if need.peak is not None and room is not None and need.peak > room:
        return gpu_name(run)
    return RENTED_CARD


def cost_text(prices: list[Price], gpu: str | None, seconds: float) -> str:
    """A GPU's price per hour and the lab's cost at it, as a range where there are several."""
    if gpu is None:
        return "no GPU to rent"
    count = int(gpu.split(" × ")[0]) if " × " in gpu else 1
    if not prices:
        base = gpu.split(" × ")[-1]
        return f"no price on file for {base} (add one to {FACTS_FILE}, cards.<card>.prices)"
    currency = prices[0].currency
    rates = sorted(p.per_hour * count for p in prices if p.currency == currency)
    hours = seconds / 3600
    if len(rates) == 1 or rates[0] == rates[-1]:
        rate = f"{money(rates[0], currency)} per hour"
        cost = money(rates[0] * hours, currency)
    else:
        rate = f"{money(rates[0], currency)}–{money(rates[-1], currency)} per hour"
        cost = f"{money(rates[0] * hours, currency)}–{money(rates[-1] * hours, currency)}"
    return f"{rate}, so the hands-on part costs {cost}"


def cost_range(prices: list[Price], gpu: str | None, seconds: float) -> str | None:
    """The cost of `seconds` on the GPU at its prices, '$0.21' or '$0.21–$0.27'; None when there
    is no GPU or no price on file."""
    if gpu is None or not prices:
        return None
    count = int(gpu.split(" × ")[0]) if " × " in gpu else 1
    currency = prices[0].currency
    rates = sorted(p.per_hour * count for p in prices if p.currency == currency)
    low, high = (money(r * seconds / 3600, currency) for r in (rates[0], rates[-1]))
    return low if low == high else f"{low}–{high}"


def short_gpu(name: str) -> str:
    """'RTX 4090' for 'NVIDIA GeForce RTX 4090', 'H200' for 'NVIDIA H200'."""
    return name.removeprefix("NVIDIA ").removeprefix("GeForce ")


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
