"""A fixture lesson full of mistakes: the build fails once, naming each page, macro call and
expectation.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from support import COURSE, RUN, make_project

from course.errors import PageError
from course.site import build_site

BROKEN = """
{{ claim("decode.tps_long > decode.tps_short", "Long decoding is faster.") }}
{% call claim("within(decode.tps_short, 100, 5)") %}Short decoding runs at about 100 tokens a second.{% endcall %}
A missing value: {{ value("decode.tps_medium") }}. A missing step: {{ value("prefill.ms") }}.
{{ figure("tiny_cache", caption="No alt text.") }}
{{ figure("tiny_cache", alt="Rises to {decode.tps_longest:0} tokens a second.") }}
{{ terminal("decode", lines="3-40") }}
{{ listing("nope.py") }}
A typed card: {{ fact("cards.rtx-4090.torch_totl") }}.
"""  # noqa: E501 - page lines as an author writes them

UNRECORDED = """---
title: No record yet
lesson: not-recorded
part: Part 3 · Later
number: "3.1"
---
Speed: {{ value("decode.tps") }}.
"""

EXPECTED = [
    "docs/part-1/tiny.md:",
    (
        "  - claim('decode.tps_long > decode.tps_short'): claim \"Long decoding is faster.\" does "
        "not hold: "
        "`decode.tps_long > decode.tps_short` is false with decode.tps_long = 201.7 tok/s, "
        "decode.tps_short = 312.4 tok/s"
    ),
    (
        "  - claim('within(decode.tps_short, 100, 5)'): claim \"Short decoding runs at about 100 "
        'tokens a second." '
        "does not hold: `within(decode.tps_short, 100, 5)` is false with decode.tps_short = 312.4 "
        "tok/s"
    ),
    (
        f"  - value('decode.tps_medium'): run {RUN}: step 'decode' captured no value 'tps_medium' "
        "(its values: model, ms_long, tps_long, tps_short)"
    ),
    f"  - value('prefill.ms'): run {RUN} of 'tiny-cache' has no step 'prefill' (steps: size, "
    "decode)",
    (
        "  - figure('tiny_cache', caption='No alt text.'): figure 'tiny_cache' needs alt text: "
        'figure("tiny_cache", alt="what it shows", caption=...)'
    ),
    (
        "  - figure('tiny_cache', alt='Rises to {decode.tps_longest:0} tokens a second.'): run "
        f"{RUN}: step 'decode' captured no value 'tps_longest' (its values: model, ms_long, "
        "tps_long, tps_short)"
    ),
    "  - terminal('decode', lines='3-40'): lines='3-40': '3-40' is outside the output's 14 lines",
    "  - listing('nope.py'): no file 'nope.py' in lab/tiny-cache/ (its files: decode.py, lab.yml, "
    "size.py)",
    (
        "  - fact('cards.rtx-4090.torch_totl'): no fact 'cards.rtx-4090.torch_totl' in "
        "lab/common/labkit/facts.toml (did you mean 'cards.rtx-4090.torch_total'?)"
    ),
    (
        f"  - check('slower'): check 'slower' needs exactly one option whose 'when' holds for run "
        f"{RUN}; "
        "holding: none"
    ),
    "docs/part-3/empty.md:",
    (
        "  - value('decode.tps'): no good run of 'not-recorded' in build/not-recorded/ (expected a "
        "recorded run: "
        "run `course run not-recorded` on a GPU machine and commit its build folder)"
    ),
]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("broken") / "project")
    page = root / "docs/part-1/tiny.md"
    page.write_text(page.read_text(encoding="utf-8") + BROKEN, encoding="utf-8")
    data = root / "docs/part-1/tiny.yml"
    # the right option's condition no longer holds for the record: no option is right
    data.write_text(
        data.read_text(encoding="utf-8").replace(
            'when: "between(decode.tps_short / decode.tps_long, 1.2, 2)"',
            'when: "between(decode.tps_short / decode.tps_long, 1.6, 2)"',
        ),
        encoding="utf-8",
    )
    (root / "docs/part-3").mkdir(exist_ok=True)
    (root / "docs/part-3/empty.md").write_text(UNRECORDED, encoding="utf-8")
    list_part_three(root)
    return root


def list_part_three(root: Path) -> None:
    """Part 3 in the outline, with the lesson of docs/part-3/empty.md, which has no record."""
    outline = root / "docs/course.yml"
    later = (
        "  - {number: 3, title: Later, lessons: "
        "[{id: not-recorded, title: No record yet, page: part-3/empty.md}]}\n"
    )
    text = outline.read_text(encoding="utf-8")
    assert text.rstrip().splitlines()[-1].startswith("      - {id:")  # the parts list ends it
    outline.write_text(text + later, encoding="utf-8")


def _lines(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.startswith(("docs/", "  - "))]


def test_the_build_fails_once_listing_every_problem(broken: Path) -> None:
    with pytest.raises(PageError) as caught:
        build_site(broken, broken / "site")
    message = str(caught.value)
    assert message.startswith("the site did not build:\n11 problems in 2 pages:")
    assert sorted(_lines(message)) == sorted(EXPECTED)


def test_course_check_reports_the_same_problems_fast(broken: Path) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [*COURSE, "--root", str(broken), "check"],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: 11 problems in 2 pages:")
    assert sorted(_lines(done.stderr)) == sorted(EXPECTED)
    assert time.perf_counter() - started < 10


def test_a_misspelt_macro_names_the_page_and_the_likely_macro(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs/part-1/pinned.md"
    page.write_text(
        page.read_text(encoding="utf-8") + '\n{{ valeu("size.layers") }}\n', encoding="utf-8"
    )
    with pytest.raises(PageError) as caught:
        build_site(root, root / "site")
    assert str(caught.value).startswith(
        "the site did not build:\n1 problem in 1 page:\ndocs/part-1/pinned.md:\n"
        "  - valeu('size.layers'): no macro or value named 'valeu' (did you mean value()?"
    )


def test_a_check_declared_but_not_placed_fails(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs/part-1/tiny.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace('{{ check("why-two") }}', ""), encoding="utf-8"
    )
    from course.site import check_site

    _, problems = check_site(root)
    assert [str(p) for p in problems] == [
        'docs/part-1/tiny.md: check("why-two"): declared in the page\'s data but never placed on '
        "the page"
    ]


def test_a_knowledge_check_without_a_right_answer_fails(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    data = root / "docs/part-1/tiny.yml"
    data.write_text(
        data.read_text(encoding="utf-8").replace("        right: true\n", ""), encoding="utf-8"
    )
    from course.site import check_site

    _, problems = check_site(root)
    assert [str(p) for p in problems] == [
        (
            "docs/part-1/tiny.md: check('slower'): docs/part-1/tiny.yml: 1 problem:\n"
            "  - check 'why-two': exactly one option must be marked 'right: true' (none is)"
        )
    ]


def test_a_missing_record_is_reported_once_per_page(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    (root / "docs/part-3").mkdir(exist_ok=True)
    (root / "docs/part-3/empty.md").write_text(
        UNRECORDED
        + (
            '{{ claim("decode.tps > 1", "Fast.") }} {{ terminal("decode") }} '
            '{{ value("size.x") }}\n'
        ),
        encoding="utf-8",
    )
    list_part_three(root)
    from course.site import check_site

    _, problems = check_site(root)
    assert [p.call for p in problems] == ["value('decode.tps')"]


def test_check_warns_when_every_right_answer_sits_at_one_letter(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    data = root / "docs" / "part-1" / "tiny.yml"
    second = """  why-three:
    question: Which numbers does the cache keep?
    options:
      - text: Keys and values of every earlier token
        right: true
      - text: Only the last token's
"""
    data.write_text(data.read_text(encoding="utf-8").replace("faq:\n", second + "faq:\n", 1))
    page = root / "docs" / "part-1" / "tiny.md"
    page.write_text(page.read_text(encoding="utf-8") + '\n{{ check("why-three") }}\n')
    done = subprocess.run(
        [*COURSE, "--root", str(root), "check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    warning = "docs/part-1/tiny.md: every knowledge check has its right answer at A: spread them"
    assert warning in " ".join(done.stderr.split())
    # moved to B, the warning goes
    data.write_text(
        data.read_text(encoding="utf-8").replace(
            "      - text: Keys and values of every earlier token\n        right: true\n"
            "      - text: Only the last token's\n",
            "      - text: Only the last token's\n"
            "      - text: Keys and values of every earlier token\n        right: true\n",
        )
    )
    again = subprocess.run(
        [*COURSE, "--root", str(root), "check"], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "warning" not in again.stderr
