"""The one number rule and the page's time facts (course/pages/format.py, facts.py)."""

from __future__ import annotations

import pytest

from course.pages.facts import HandsOn, hands_on_text
from course.pages.format import change, minutes_text, recorded, significant


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "under a minute"),
        (0.8, "under a minute"),
        (59.9, "under a minute"),
        (60, "about 1 min"),
        (89, "about 1 min"),
        (91, "about 2 min"),
        (3900, "about 1 h 05 min"),
    ],
)
def test_minutes_are_rounded_to_the_nearest_and_under_a_minute_is_reachable(
    seconds: float, text: str
) -> None:
    assert minutes_text(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (114688, "114,688"),
        (448.0, "448"),
        (0.34591, "0.3459"),
        (201.66, "201.7"),
        (1.5488, "1.549"),
        (44.001, "44"),  # whole at four significant digits
        (44.01, "44.01"),
        (12345678.9, "12,345,679"),
        (0.000012345, "0.00001234"),
        (-3.25, "-3.250"),
    ],
)
def test_numbers_without_named_decimals_follow_one_rule(value: float, text: str) -> None:
    assert significant(value) == text
    assert "e" not in significant(value)


def test_values_runs_and_changes_share_the_rule() -> None:
    assert recorded(150.0, "tok/s") == "150 tok/s"
    assert recorded(201.7, "tok/s") == "201.7 tok/s"
    assert recorded("Qwen3-8B") == "Qwen3-8B"
    assert change(-0.2562) == "-25.6 %" and change(0.125) == "+12.5 %"
    assert change(float("inf")) == "new" and change(None) == ""


def test_hands_on_leaves_out_what_takes_no_time() -> None:
    assert hands_on_text(HandsOn(0.84, 0, 0, 0, 0)) == (
        "under a minute: the recorded steps took 0.84 s"
    )
    assert hands_on_text(HandsOn(96.5, 240, 300, 0, 120)) == (
        "about 13 min: the recorded steps took 1 min 36 s, plus 4 min of installs, 5 min of "
        "downloads and 2 min to read and type each step (a minute a step)"
    )
    assert hands_on_text(HandsOn(2, 30, 0, 0, 0)) == (
        "under a minute: the recorded steps took 2.00 s, plus under a minute of installs"
    )
    # a native engine built for the lab counts, named
    assert hands_on_text(HandsOn(600, 180, 0, 288.4, 840), ["llama.cpp"]) == (
        "about 32 min: the recorded steps took 10 min 00 s, plus 5 min to build llama.cpp, 3 min "
        "of installs and 14 min to read and type each step (a minute a step)"
    )
