"""The fixed text every perplexity run reads: a made-up maintenance log, the same words each time.

It is made from a fixed random seed, long enough for the chunks llama-perplexity scores (about
five characters a token, with room to spare). Standard library only.
"""

from __future__ import annotations

import random
from pathlib import Path

SEED = 33
WEATHER = ("clear and calm", "overcast", "light drizzle", "steady rain", "fog until noon",
           "strong wind from the west", "a short hail shower")  # fmt: skip
CREW = ("Amara", "Bjorn", "Chen", "Dario", "Eilidh", "Farid", "Grete", "Hugo")
PUMPS = ("north pump", "south pump", "booster pump")
CHORES = ("cleared leaves from the intake screen", "recalibrated the chlorine dosing unit",
          "greased the bearings of the {pump}", "took water samples at the east reservoir",
          "tightened a leaking joint near pressure valve 3", "replaced a cracked gauge on the {pump}",
          "walked the fence line and found nothing out of order", "flushed the settling tank")  # fmt: skip


def make_text(tokens: int) -> str:
    """A log of at least `tokens` tokens (counted generously: five characters a token)."""
    rng = random.Random(SEED)
    lines = ["Maintenance log of the Hollow Creek water station"]
    day = 0
    while sum(len(x) for x in lines) < 5 * tokens:
        day += 1
        crew, pump = rng.choice(CREW), rng.choice(PUMPS)
        weather = rng.choice(WEATHER)
        rain = round(rng.uniform(0.5, 38.0), 1) if "rain" in weather or "drizzle" in weather else 0
        hours = round(rng.uniform(2.0, 11.5), 1)
        a, b = rng.sample(CHORES, 2)
        lines.append(
            f"Day {day}. Weather: {weather}; {rain} mm of rain in the gauge. {crew} was on duty."
            f" The {pump} ran for {hours} hours and moved {int(hours * rng.uniform(38, 52))} cubic"
            f" metres of water. {crew} {a.format(pump=pump)} and {b.format(pump=pump)}."
        )
    return "\n".join(lines) + "\n"


def write_text(path: Path, tokens: int) -> Path:
    """The text, written to `path` (llama-perplexity reads a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(make_text(tokens), encoding="utf-8")
    return path
