"""The page errors a first-time author met, each made precise: what is wrong, and where."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import RUN, make_project

from course.errors import PageError
from course.pages.context import Problem
from course.pages.lessons import PageEntry, read_meta, scan
from course.pages.render import render_page
from course.pages.state import report

PAGE = "part-1/tiny.md"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def problems(root: Path, extra: str = "") -> list[str]:
    """The problems of the fixture page with `extra` appended to it, as `call: message`."""
    page = root / "docs" / PAGE
    if extra:
        page.write_text(page.read_text(encoding="utf-8") + extra, encoding="utf-8")
    meta, raw, _ = read_meta(page, f"docs/{PAGE}")
    rendered = render_page(root, PageEntry(PAGE, meta, raw))
    return [f"{p.call}: {p.message}" for p in rendered.context.problems]


def edit_data(root: Path, old: str, new: str) -> None:
    path = root / "docs/part-1/tiny.yml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_expression_errors_say_why_and_blame_minus_only_where_it_applies(root: Path) -> None:
    found = problems(
        root,
        '\n{{ value("size.bytes_per_token *") }} {{ value("(size.layers") }}\n'
        '{{ value("size.bytes_per_token * 4096-size.layers") }}\n'
        "{{ value(\"size.layers\", decimals='x') }} {{ value(\"size.layers\", unit='parsecs') }}\n",
    )
    assert found == [
        "value('size.bytes_per_token *'): cannot read the expression 'size.bytes_per_token *': "
        "invalid syntax",
        "value('(size.layers'): cannot read the expression '(size.layers': '(' was never closed",
        "value('size.bytes_per_token * 4096-size.layers'): run "
        f"{RUN} of 'tiny-cache' has no step '4096-size' (steps: size, decode) (to subtract, put "
        "spaces around '-': '4096 - size.layers')",
        "value('size.layers', decimals='x'): decimals='x': expected a whole number, such as "
        "decimals=2",
        "value('size.layers', unit='parsecs'): 'size.layers' has no unit to convert to parsecs",
    ]


def test_a_problem_inside_a_check_names_the_check_and_its_part(root: Path) -> None:
    edit_data(root, "measured: decode.tps_short / decode.tps_long", "measured: decode.tps_x")
    edit_data(root, 'that is a separate factor of {{ value("size', 'that is {{ value("sizes')
    found = problems(root)
    assert found == [
        "check('slower'): measured: run "
        f"{RUN}: step 'decode' captured no value 'tps_x' (its values: model, ms_long, tps_long, "
        "tps_short)",
        "check 'why-two' in docs/part-1/tiny.yml: value('sizes.bytes_per_token / size.layers / 8 "
        f"/ 128 / 2'): run {RUN} of 'tiny-cache' has no step 'sizes' (steps: size, decode)",
    ]


def test_a_bad_condition_and_a_bad_template_in_the_data_name_their_option(root: Path) -> None:
    edit_data(root, 'when: "decode.tps_short / decode.tps_long < 1.2"', 'when: "decode.tps_short"')
    edit_data(root, "a: Yes, by the same amount", "a: Yes, {{ valeu(1) }} by the same amount")
    found = problems(root)
    assert found[0] == (
        "check('slower'): option #1: when: 'when: decode.tps_short' gives a number, not true or "
        "false"
    )
    assert found[1].startswith(
        "faq(): faq #2: a: UndefinedError: 'valeu' is undefined in 'Yes, {{ valeu(1) }} by the "
    )


def test_a_data_file_error_names_the_check_and_the_allowed_keys(root: Path) -> None:
    edit_data(root, "    decimals: 2\n", "    decimals: two\n")
    edit_data(root, "      - text: Two bytes per number", "      - txt: Two bytes per number")
    (message,) = {m.split(": ", 1)[1] for m in problems(root)}
    assert message.splitlines() == [
        "docs/part-1/tiny.yml: 3 problems:",
        "  - check 'slower': decimals: Input should be a valid integer, unable to parse string as "
        "an integer (got 'two')",
        "  - check 'why-two', option #2: text: required but missing",
        "  - check 'why-two', option #2: unknown key 'txt' (did you mean 'text'?); allowed here: "
        "text, right, when, why",
    ]


def test_a_nested_list_of_problems_is_indented_under_its_call() -> None:
    nested = "docs/x.yml: 2 problems:\n  - check 'a': one\n  - check 'b': two"
    text = report([Problem("docs/x.md", "check('a')", nested), Problem("docs/x.md", "v()", "z")])
    assert text.splitlines() == [
        "2 problems in 1 page:",
        "docs/x.md:",
        "  - check('a'): docs/x.yml: 2 problems:",
        "      - check 'a': one",
        "      - check 'b': two",
        "  - v(): z",
    ]


def test_a_claim_whose_words_hold_a_blank_line_is_refused(root: Path) -> None:
    found = problems(
        root,
        '\nIt is {% call claim("decode.tps_short > decode.tps_long") %}slower\n\nat length'
        "{% endcall %}.\n",
    )
    assert found == [
        "claim('decode.tps_short > decode.tps_long'): its words hold a blank line, which ends a "
        "paragraph in the middle of the claim: a claim marks words inside a paragraph (a whole "
        "sentence, or a phrase in the middle of one); keep its words together, or make two claims"
    ]


def test_a_front_matter_error_names_the_line_the_key_and_the_keys_allowed(root: Path) -> None:
    page = root / "docs" / PAGE
    text = page.read_text(encoding="utf-8")
    old = "headline: {value: size.bytes_per_token, unit: KiB, label: per token}\n"
    assert text.splitlines()[3] + "\n" == old  # line 4 of the page
    page.write_text(
        text.replace(old, "headline:\n  value: size.bytes_per_token\n  lable: per token\n"
                     "  one CPU core: 1\nrun: 7\n"),
        encoding="utf-8",
    )  # fmt: skip
    expected = (
        f"docs/{PAGE}: front matter: 4 problems:\n"
        "  - line 5: headline.label: required but missing\n"
        "  - line 6: headline.lable: unknown key 'lable' (did you mean 'label'?); headline takes: "
        "value, label, unit, decimals\n"
        "  - line 7: headline.one CPU core: unknown key 'one CPU core'; headline takes: value, "
        "label, unit, decimals\n"
        "  - line 8: run: Input should be a valid string (got 7)"
    )
    with pytest.raises(PageError) as read:
        read_meta(page, f"docs/{PAGE}")
    assert str(read.value) == expected
    with pytest.raises(PageError) as scanned:  # as the build and `course check` meet it
        scan(root / "docs")
    assert str(scanned.value) == expected


def test_a_check_holds_one_question(root: Path) -> None:
    edit_data(
        root,
        "    question: Why is there a factor 2 in the bytes per token?\n",
        "    questions:\n      - Why is there a factor 2 in the bytes per token?\n"
        "      - And why 8?\n",
    )
    (message,) = {m.split(": ", 1)[1] for m in problems(root)}
    assert message.splitlines() == [
        "docs/part-1/tiny.yml: 1 problem:",
        "  - check 'why-two': a check holds one question: make each question a check of its own, "
        "under its own id in checks:, and place each with check('id') (several in a row make a "
        "quiz)",
    ]
