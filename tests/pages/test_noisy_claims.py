"""Claims over timed values: they hold beyond the spread, or by a stated tolerance; `course check`
warns about a fragile one, naming its page and line; a value's tooltip gives its spread."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import COURSE, make_timed_project, timed, write_timed_run

from course.pages.claims import check_claim
from course.pages.lessons import scan
from course.pages.render import render_page
from course.record.models import Spread
from course.record.quantity import ExprError, Quantity
from course.site import check_pages

RECORD = {
    # 23.6 ms, quartiles 23.1-25.9, range 22.8-30.1 (a 128-token prompt, timed 20 times)
    "prefill.ttft_128": Quantity(
        23.6, "ms", ("prefill.ttft_128",), spread=Spread(n=20, min=22.8, q1=23.1, q3=25.9, max=30.1)
    ),
    "prefill.ttft_512": Quantity(
        26.4, "ms", ("prefill.ttft_512",), spread=Spread(n=20, min=25.0, q1=25.5, q3=27.0, max=28.0)
    ),
    "paper.ttft_predicted_128": Quantity(3.57, "ms", ("paper.ttft_predicted_128",)),
    "size.layers": Quantity(36, "none", ("size.layers",), True),
}


def lookup(reference: str) -> Quantity:
    if reference not in RECORD:
        raise ExprError(f"no value '{reference}'")
    return RECORD[reference]


SHOWN_128 = "23.60 ms (median of 20; quartiles 23.10–25.90 ms, range 22.80–30.10 ms)"


def test_a_claim_holds_beyond_the_spread_and_fails_within_it() -> None:
    beyond = check_claim("prefill.ttft_128 > 6 * paper.ttft_predicted_128", "Far.", lookup)
    assert beyond.holds and beyond.fragile is None  # 22.8 > 21.42 even at the fastest repeat
    inside = check_claim("prefill.ttft_128 > 6.5 * paper.ttft_predicted_128", "Close.", lookup)
    assert not inside.holds  # 23.6 > 23.205 on the medians, but the first quartile is 23.1
    assert inside.message() == (
        'claim "Close." holds only within noise: `prefill.ttft_128 > 6.5 * '
        "paper.ttft_predicted_128` holds on the medians by 1.7 % (`prefill.ttft_128 > 6.5 * "
        "paper.ttft_predicted_128`), but its timed values' quartiles need 2.2 %; widen the "
        "claim's margin, or state the noise you expect at its end (`prefill.ttft_128 > 6.5 * "
        f"paper.ttft_predicted_128 ± N %`), with prefill.ttft_128 = {SHOWN_128}, "
        "paper.ttft_predicted_128 = 3.570 ms"
    )
    overlap = check_claim("prefill.ttft_512 > prefill.ttft_128", "Longer is slower.", lookup)
    assert not overlap.holds  # 26.4 > 23.6, but the quartiles 25.5-27.0 and 23.1-25.9 overlap
    assert overlap.noise is not None and "by 11.9 %" in overlap.noise
    # a value without spread behaves as before: only its median counts
    assert check_claim("size.layers * 1 > 35.99", "Exact.", lookup).holds


def test_a_stated_tolerance_replaces_the_spread() -> None:
    claim = "prefill.ttft_128 > 6.5 * paper.ttft_predicted_128"
    # each timed value anywhere within 1 % of its median: 23.364 > 23.205 holds
    assert check_claim(f"{claim} ± 1 %", "Close.", lookup).holds
    assert check_claim(f"{claim} +/- 1.5%", "Close.", lookup).holds
    wide = check_claim(f"{claim} ± 5 %", "Close.", lookup)
    assert not wide.holds and wide.condition == f"{claim} ± 5 %"
    assert wide.noise == (
        f"`{claim}` holds on the medians by 1.7 % (`{claim}`), but its timed values' stated "
        "tolerance (± 5.0 % each) need 5.1 %; widen the claim's margin, or state the noise you "
        f"expect at its end (`{claim} ± N %`)"
    )
    # a tolerance on a claim over exact values changes nothing; a malformed one is not one
    assert check_claim("size.layers == 36 ± 10 %", "Exact.", lookup).holds
    broken = check_claim("size.layers == 36 ± ten %", "Typo.", lookup)
    assert not broken.holds and broken.error is not None
    assert broken.error.startswith("cannot read the expression 'size.layers == 36 ± ten %'")


def test_a_fragile_claim_says_by_how_much_it_holds() -> None:
    claim = "prefill.ttft_128 > 6.4 * paper.ttft_predicted_128"
    result = check_claim(claim, "Fragile.", lookup)
    assert result.holds  # beyond the quartiles (23.1 > 22.848), not beyond the range (22.8)
    assert result.fragile == (
        f"holds by 3.3 %, spread 3.5 % (`{claim}`, over the whole range of the repeats)"
    )


OLD, NEW = "2026-12-01T090000Z-cpu", "2026-12-02T090000Z-cpu"
PAGE = "docs/part-1/timed-sum.md"
EXTRA = """
{{ claim("time.large_ms > 8 * time.small_ms", "Eight times as long, at least.") }}
{{ claim("time.large_ms > 10 * time.small_ms ± 3 %", "Ten times, give or take.") }}
"""


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The timed fixture project with one recorded run of chosen numbers and two more claims."""
    root = make_timed_project(tmp_path_factory.mktemp("noisy") / "project")
    values = {
        "small_ms": timed(0.19, 0.17, 0.18, 0.20, 0.24),
        "large_ms": timed(2.0, 1.9, 1.95, 2.05, 2.4),
        "large_best_ms": timed(1.9, 1.9, 1.9, 1.9, 1.9, n=1),
    }
    values["items"] = values["small_ms"].model_copy(
        update={"value": 200000, "type": "int", "unit": "none", "spread": None}
    )
    write_timed_run(root, OLD, values)
    page = root / PAGE
    page.write_text(page.read_text() + EXTRA)
    return root


def test_course_check_fails_a_claim_within_noise_and_warns_about_a_fragile_one(
    noisy: Path,
) -> None:
    checked = check_pages(noisy)
    problems, warnings = checked.problems, checked.warnings
    assert [(p.page, p.call) for p in problems] == [
        (PAGE, "claim('time.large_ms > 10 * time.small_ms ± 3 %')")
    ]
    assert problems[0].message.startswith(
        'claim "Ten times, give or take." holds only within noise: `time.large_ms > 10 * '
        "time.small_ms` holds on the medians by 5.3 %"
    )
    assert warnings == [
        f'{PAGE}:12: claim "Eight times as long, at least." holds by 31.6 %, spread 32.9 % '
        "(`time.large_ms > 8 * time.small_ms`, over the whole range of the repeats): a re-run "
        "may fail it"
    ]
    page = noisy / PAGE
    text = page.read_text()
    page.write_text(text.replace(" ± 3 %", " ± 1 %"))  # 1.98 > 1.919: it holds now
    try:
        done = subprocess.run(
            [*COURSE, "--root", str(noisy), "check"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "300"},
        )
    finally:
        page.write_text(text)
    assert done.returncode == 0, done.stderr
    assert (
        f'warning: {PAGE}:12: claim "Eight times as long, at least." holds by 31.6 %, spread '
        "32.9 %" in done.stderr
    )
    assert (
        f'warning: {PAGE}:13: claim "Ten times, give or take." holds by 5.3 %, spread 31.6 %'
        in done.stderr
    )


def test_a_timed_value_shows_its_spread_in_its_tooltip(noisy: Path) -> None:
    entry = next(e for e in scan(noisy / "docs") if e.src == "part-1/timed-sum.md")
    markdown = render_page(noisy, entry).markdown or ""
    assert (
        f'data-source="{OLD}/time.large_ms" title="measured in run {OLD}, step time; median of '
        '15, 1.900–2.400 ms">2\u00a0ms</span>'
    ) in markdown
    assert f'title="worked out in run {OLD}, step time">200,000</span>' in markdown
