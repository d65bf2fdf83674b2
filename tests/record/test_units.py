"""Units an author expects (µs, MB/s, req/s, ...): converted within their dimension, accepted by
lab.yml, and carried through arithmetic on values."""

from __future__ import annotations

import pytest

from course.lab.schema import Capture
from course.record.expression import Expression
from course.record.quantity import ExprError, Quantity
from course.record.units import convert


@pytest.mark.parametrize(
    ("value", "unit", "to", "expected"),
    [
        (2500, "µs", "ms", 2.5),
        (0.0002794, "s", "µs", 279.4),
        (1500, "ns", "µs", 1.5),
        (90, "s", "min", 1.5),
        (3e6, "B/s", "MB/s", 3.0),
        (2048, "MB/s", "GB/s", 2.048),
        (1, "GiB/s", "MiB/s", 1024),
        (4.8, "TB/s", "GB/s", 4800),
        (1536, "KB", "MB", 1.536),
        (1, "TiB", "GiB", 1024),
        (120, "req/s", "req/s", 120),
        (989, "TFLOP/s", "GFLOP/s", 989_000),
    ],
)
def test_units_convert_within_their_dimension(
    value: float, unit: str, to: str, expected: float
) -> None:
    assert convert(value, unit, to) == pytest.approx(expected)


def test_units_of_another_dimension_or_unknown_ones_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^cannot convert req/s \(request rate\) to tok/s"):
        convert(1, "req/s", "tok/s")
    with pytest.raises(ValueError, match=r"^unknown unit 'MBps' \(did you mean 'MB/s'\?\)"):
        convert(1, "MBps", "GB/s")
    with pytest.raises(ValueError, match=r"^unknown unit 'us' \(write 'µs'\)"):
        convert(1, "us", "ms")


def test_lab_yml_takes_the_units_and_reads_us_as_microseconds() -> None:
    for unit in ("µs", "MB/s", "req/s", "ns", "TFLOP/s"):
        assert Capture.model_validate({"regex": "(\\d+)", "unit": unit}).unit == unit
    assert Capture.model_validate({"regex": "(\\d+)", "unit": "us"}).unit == "µs"


def test_arithmetic_gives_rates_in_their_units() -> None:
    record = {
        "serve.requests": Quantity(500, "req"),
        "serve.seconds": Quantity(2, "s"),
        "serve.bytes": Quantity(3e9, "B"),
        "serve.p50": Quantity(250, "µs"),
        "serve.rate": Quantity(240, "req/s"),
    }

    def evaluate(text: str) -> Quantity | bool:
        return Expression.parse(text).evaluate(lambda name: record[name])

    assert evaluate("serve.requests / serve.seconds") == Quantity(250.0, "req/s")
    bandwidth = evaluate("serve.bytes / serve.seconds")
    assert isinstance(bandwidth, Quantity) and (bandwidth.value, bandwidth.unit) == (1.5, "GB/s")
    assert evaluate("to(serve.bytes / serve.seconds, 'MB/s') == 1500")
    assert evaluate("serve.p50 < 1000") is True  # a plain number takes the other side's unit
    assert evaluate("to(serve.p50, 'ms') == 0.25")
    assert evaluate("serve.rate < serve.requests / serve.seconds") is True
    with pytest.raises(ExprError, match=r"cannot convert req/s \(request rate\) to tok/s"):
        evaluate("serve.rate < to(serve.rate, 'tok/s')")
