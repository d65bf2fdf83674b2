"""Claims and the expression language under them: conditions, units, and the messages when they
fail.
"""

from __future__ import annotations

import pytest

from course.pages.claims import check_claim, plain_text
from course.pages.format import format_number
from course.record.expression import Expression
from course.record.quantity import ExprError, Quantity

RECORD = {
    "size.bytes_per_token": Quantity(114688, "B", ("size.bytes_per_token",), True),
    "size.tokens": Quantity(4096, "tok", ("size.tokens",), True),
    "decode.tps_short": Quantity(312.4, "tok/s", ("decode.tps_short",)),
    "decode-long.tps": Quantity(201.7, "tok/s", ("decode-long.tps",)),
    "decode-long.ms": Quantity(4.958, "ms", ("decode-long.ms",)),
    "decode.model": Quantity(float("nan"), "none", ("decode.model",), False, "Qwen3-0.6B"),
}


def lookup(reference: str) -> Quantity:
    if reference not in RECORD:
        raise ExprError(f"no value '{reference}'")
    return RECORD[reference]


def evaluate(text: str) -> Quantity | bool:
    return Expression.parse(text).evaluate(lookup)


@pytest.mark.parametrize(
    "condition",
    [
        "size.bytes_per_token == 114688",
        "to(size.bytes_per_token * size.tokens, 'MiB') == 448",
        "size.bytes_per_token * size.tokens == 448 * 1024 * 1024",
        "round_eq(size.bytes_per_token, 112, 0, 'KiB')",
        "decode.tps_short > decode-long.tps",
        "decode-long.tps < decode.tps_short and not decode-long.tps > 300",
        "200 < decode-long.tps <= 202",
        "within(decode-long.tps, 200, 1)",
        "between(ratio(decode.tps_short, decode-long.tps), 1.5, 1.6)",
        "between(decode.tps_short / decode-long.tps, 1.5, 1.6)",
        "to(decode-long.ms, 's') < 0.005",
        "decode-long.ms == 0.004958 * 1000",
        "decode.model == 'Qwen3-0.6B'",
        "max(decode.tps_short, decode-long.tps) == decode.tps_short",
    ],
)
def test_conditions_that_hold(condition: str) -> None:
    result = check_claim(condition, "A sentence.", lookup)
    assert result.holds, result.message()


def test_a_failing_claim_names_its_text_condition_and_values() -> None:
    result = check_claim(
        "decode-long.tps > decode.tps_short",
        'Decoding <span class="course-value">long</span> is  faster.',
        lookup,
    )
    assert not result.holds
    assert result.message() == (
        'claim "Decoding long is faster." does not hold: `decode-long.tps > decode.tps_short` is '
        "false "
        "with decode-long.tps = 201.7 tok/s, decode.tps_short = 312.4 tok/s"
    )


def test_an_unknown_value_makes_a_claim_fail_with_the_reason() -> None:
    result = check_claim("decode.nope > 1", "Text.", lookup)
    assert not result.holds
    assert (
        result.message()
        == "claim \"Text.\": cannot check `decode.nope > 1`: no value 'decode.nope'"
    )


def test_a_number_is_not_a_condition() -> None:
    result = check_claim("decode.tps_short / 2", "Text.", lookup)
    assert not result.holds and "gives a number, not true or false" in result.message()


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("size.bytes_per_token + decode.tps_short", "cannot add or subtract B and tok/s"),
        ("size.bytes_per_token * size.bytes_per_token", "cannot multiply B by B"),
        ("decode.tps_short < size.bytes_per_token", "cannot compare tok/s with B"),
        ("to(size.bytes_per_token, 'ms') > 1", "cannot convert B (bytes) to ms (time)"),
        ("__import__('os')", "unknown function '__import__'"),
        ("size.bytes_per_token.real", "attribute is not allowed"),
        ("[1, 2]", "list is not allowed"),
        ("size.bytes_per_token / 0", "division by zero"),
    ],
)
def test_expressions_refuse_what_they_cannot_mean(expression: str, message: str) -> None:
    with pytest.raises(ExprError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(expression)


def test_units_follow_the_arithmetic() -> None:
    product = evaluate("size.bytes_per_token * size.tokens")
    assert isinstance(product, Quantity) and (product.value, product.unit) == (469762048, "B")
    assert product.sources == ("size.bytes_per_token", "size.tokens")
    rate = evaluate("size.tokens / decode-long.ms")
    assert isinstance(rate, Quantity) and rate.unit == "tok/s"
    assert rate.value == pytest.approx(4096 / 0.004958)
    bandwidth = evaluate("size.bytes_per_token * size.tokens / decode-long.ms")
    assert isinstance(bandwidth, Quantity) and bandwidth.unit == "GB/s"
    assert bandwidth.value == pytest.approx(469762048 / 0.004958 / 1e9)
    ratio = evaluate("decode.tps_short / decode-long.tps")
    assert isinstance(ratio, Quantity) and ratio.unit == "none"


def test_numbers_are_formatted_with_separators_and_decimals() -> None:
    assert format_number(1234567.891, 2) == "1,234,567.89"
    assert format_number(1234567.891, 0, separators=False) == "1234568"
    assert format_number(-0.0001, 2) == "0.00"


def test_plain_text_of_a_sentence() -> None:
    assert (
        plain_text('One <span class="x">token</span>&nbsp;takes\n 112&nbsp;KiB.')
        == "One token takes 112 KiB."
    )
