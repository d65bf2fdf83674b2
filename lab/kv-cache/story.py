"""The words of step 3's chat: a long made-up station log, two questions, and the "generated" reply.

The log is produced from a fixed random seed, so every run sends exactly the same tokens.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

SYSTEM = (
    "You are a careful assistant. Answer from the document the user gives you and name the day."
)
QUESTION = "On which day did the most rain fall at the station, and how much was it?"
FOLLOW_UP = "Thank you. On which day was the main sand filter last replaced, and by whom?"

WEATHER = [
    "clear and calm",
    "overcast",
    "light drizzle",
    "steady rain",
    "fog until noon",
    "strong wind from the west",
    "a short hail shower",
]
CREW = ["Amara", "Bjorn", "Chen", "Dario", "Eilidh", "Farid", "Grete", "Hugo"]
PUMPS = ["north pump", "south pump", "booster pump"]
CHORES = [
    "cleared leaves from the intake screen",
    "recalibrated the chlorine dosing unit",
    "greased the bearings of the {pump}",
    "took water samples at the east reservoir",
    "tightened a leaking joint near pressure valve 3",
    "replaced a cracked gauge on the {pump}",
    "walked the fence line and found nothing out of order",
    "flushed the settling tank",
]


def make_document(tokens: int, count: Callable[[str], int]) -> tuple[str, dict[str, Any]]:
    """A log of at least `tokens` tokens (as measured by `count`), and the facts the reply cites."""
    rng = random.Random(2024)
    text = "Maintenance log of the Hollow Creek water station\n"
    wettest = {"day": 0, "mm": -1.0, "crew": ""}
    filter_change = {"day": 0, "crew": ""}
    day = 0
    while count(text) < tokens:
        day += 1
        crew = rng.choice(CREW)
        weather = rng.choice(WEATHER)
        rain = (
            round(rng.uniform(0.5, 38.0), 1) if "rain" in weather or "drizzle" in weather else 0.0
        )
        pump = rng.choice(PUMPS)
        hours = round(rng.uniform(2.0, 11.5), 1)
        volume = int(hours * rng.uniform(38, 52))
        chores = rng.sample(CHORES, 2)
        entry = (
            f"\nDay {day}. Weather: {weather}; {rain} mm of rain in the gauge. {crew} was on duty."
            f" The {pump} ran for {hours} hours and moved {volume} cubic metres of water."
            f" {crew} {chores[0].format(pump=pump)} and {chores[1].format(pump=pump)}."
        )
        if day % 9 == 4:
            entry += (
                f" {crew} replaced the main sand filter; the old one had clogged at the bottom."
            )
            filter_change = {"day": day, "crew": crew}
        if rain > wettest["mm"]:
            wettest = {"day": day, "mm": rain, "crew": crew}
        text += entry
    return text, {"wettest": wettest, "filter": filter_change, "days": day}


def reply_text(facts: dict[str, Any]) -> str:
    """The assistant's first reply as the model would generate it, reasoning first."""
    wet = facts["wettest"]
    return (
        "<think>\n"
        f"The user wants the wettest day. The log covers {facts['days']} days, and each entry gives"
        " the rain in the gauge in millimetres. Going through them, the largest amount is"
        f" {wet['mm']} mm, on day {wet['day']}.\n"
        "</think>\n\n"
        f"The most rain fell on day {wet['day']}: {wet['mm']} mm, recorded while {wet['crew']}"
        " was on duty."
    )
