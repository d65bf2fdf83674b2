"""The page checks (`course/pages/lint/`): a fixture lesson with one of each mistake planted in its
page, its data file and its lab; `course check` and the build fail listing each, by file and line.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import COURSE, REPO, make_project

from course.errors import PageError
from course.lab.facts import FACTS_FILE, load_facts
from course.pages.lessons import scan
from course.pages.lint import Known, check_page, known_source, load_settings
from course.pages.lint.numbers import KNOWN_SOURCES, copies_of, typed_numbers
from course.record.units import SCALE, convert
from course.site import build_site, check_pages

PLANTED = """## Planted

Decoding took 4.96 ms per token at the longest length, 2 MiB at a time, on a 24 GB card in 2024.
The speed, 312.4 tok/s{# typed: ok #}, is typed on purpose; {{ value("size.tokens") }} tokens.
The long speed is {{ value("decode.tps_long / decode.tps_short", percent=True, decimals=0) }} %
of the short one. The cache takes 448.00 MiB, an A100-40GB would hold it.
{% call claim("to(size.cache_bytes, 'MiB') == 448") %}Exactly 448 MiB, checked.{% endcall %}
Short ran at {{ value("decode.tps_short", decimals=1) }}, and the best,
{{ value("decode.tps_short", decimals=1) }}, was the short one.

One card holds {{ value("size.layers") }} conversations at once.

With vLLM's share of the whole card, a card holds {{ value("size.layers") }} conversations.
Our GPU host was busy that day.
Step 1 was measured on 20 November 2026; Qwen3 came out on 29 April 2025.

"""
SOURCES = """
- Our recorded run, as the closing box says.
- Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention"
  (SOSP 2023).
- vLLM's documentation (docs.vllm.ai/en/latest), read 2026-11-30.
- [PyTorch's allocator](https://pytorch.org/docs/stable/notes/cuda.html), read 2026-11-30.
"""
WHY = "why: Reading the cache adds to reading the weights; at this size the weights still dominate."
FAQ = """  - q: How fast is the short decode?
    a: "{{ value('decode.tps_short') }} tok/s, as the course's notes say."
"""
README = "# The tiny lab\n\nIts numbers were checked\nagainst a code search.\n"


def expected(start: int, sources: int, why: int, faq: int) -> list[str]:
    """The problems `course check` lists for the planted mistakes, with their lines."""
    page, data = "docs/part-1/tiny.md", "docs/part-1/tiny.yml"
    return [
        f"{page}:",
        '  - line 5: tooling-phrase: "GPU host" is about the course\'s tooling, not the subject: '
        "\"summary: A GPU host's lesson that uses every macro, so the tests can look at what "
        'each on…"',
        f'  - line {start + 2}: typed-copy: "4.96 ms" is typed by hand and equals the recorded '
        'value decode.ms_long (4.958 ms): insert it with {{ value("decode.ms_long", decimals=2) }}',
        f'  - line {start + 3}: unit-twice: "4,096 tok tokens" prints its unit twice (value() '
        "already prints 'tok': remove the typed 'tokens', or give the macro show_unit=False)",
        f'  - line {start + 4}: unit-twice: "65 % %" prints its unit twice (value() already prints '
        "'%': remove the typed '%', or give the macro show_unit=False)",
        f'  - line {start + 5}: typed-copy: "448.00 MiB" is typed by hand and equals the recorded '
        "value size.cache_bytes (469,762,048 B): insert it with "
        '{{ value("size.cache_bytes", unit="MiB", decimals=2) }}',
        f"  - line {start + 7}: same-value: one sentence shows 312.4 twice: "
        '"Short ran at 312.4 tok/s, and the best, 312.4 tok/s, was the short one."',
        f'  - line {start + 10}: fit-rule: "28 conversations" counts what fits without naming the '
        'engine rule it assumes: "One card holds 28 conversations at once." (name it in the '
        "paragraph: vLLM's share of the whole card, transformers' share of the memory free after "
        "the weights, llama.cpp's given context)",
        f'  - line {start + 13}: tooling-phrase: "GPU host" is about the course\'s tooling, not '
        'the subject: "Our GPU host was busy that day."',
        f'  - line {start + 14}: typed-date: "20 November 2026" is typed by hand and is the day '
        "of the lesson's run 2026-11-20T090000Z-h200: a sentence on when steps were measured goes "
        "stale with the next run; provenance() says it from the record",
        f'  - line {sources + 2}: source-address: "Kwon et al., "Efficient Memory Management for '
        'Large Language Model Serving with…" has no address: give the address it was read at, as '
        "a link [...](https://...)",
        f"  - line {sources + 4}: source-address: \"vLLM's documentation "
        '(docs.vllm.ai/en/latest), read 2026-11-30." has no address: it names '
        "docs.vllm.ai/en/latest without https://: write it as a link, "
        "[...](https://docs.vllm.ai/en/latest)",
        f"{data}:",
        f"  - line {why}: typed-copy: check 'slower', option #2 why: \"201.7 tok/s\" is typed by "
        "hand and equals the recorded value decode.tps_long (201.7 tok/s): insert it with "
        '{{ value("decode.tps_long", decimals=1) }}',
        f'  - line {faq + 1}: tooling-phrase: faq #3 a: "the course\'s notes" is about the '
        "course's tooling, not the subject: \"312.4 tok/s tok/s, as the course's notes say.\"",
        f'  - line {faq + 1}: unit-twice: faq #3 a: "312.4 tok/s tok/s" prints its unit twice '
        "(value() already prints 'tok/s': remove the typed 'tok/s', or give the macro "
        "show_unit=False)",
        "lab/tiny-cache/README.md:",
        '  - line 4: tooling-phrase: "code search" is about the course\'s tooling, not the '
        'subject: "against a code search."',
    ]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The fixture project with the mistakes planted; the problems they make."""
    root = make_project(tmp_path_factory.mktemp("lint") / "project")
    page = root / "docs/part-1/tiny.md"
    text = page.read_text(encoding="utf-8")
    head, tail = text.split("## Sources\n", 1)
    start = head.count("\n") + 1
    text = head + PLANTED + "## Sources\n" + SOURCES + tail
    text = text.replace("summary: A fixture lesson", "summary: A GPU host's lesson", 1)
    page.write_text(text, encoding="utf-8")
    sources = start + PLANTED.count("\n") + 1
    data = root / "docs/part-1/tiny.yml"
    yml = data.read_text(encoding="utf-8")
    yml = yml.replace(WHY, WHY.replace("dominate.", "dominate, 201.7 tok/s at 4,096 tokens."))
    yml = yml.replace("glossary:\n", FAQ + "glossary:\n")
    data.write_text(yml, encoding="utf-8")
    lines = yml.split("\n")
    why = next(n for n, line in enumerate(lines, 1) if "201.7 tok/s" in line)
    faq = next(n for n, line in enumerate(lines, 1) if "How fast is the short" in line)
    (root / "lab/tiny-cache/README.md").write_text(README, encoding="utf-8")
    return root, expected(start, sources, why, faq)


def _listed(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.startswith(("docs/", "lab/", "  - "))]


def test_course_check_lists_every_planted_mistake_at_its_line(
    planted: tuple[Path, list[str]],
) -> None:
    root, problems = planted
    done = subprocess.run(
        [*COURSE, "--root", str(root), "check"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: 15 problems in 3 pages:")
    assert _listed(done.stderr) == problems


def test_the_build_fails_on_them_too(planted: tuple[Path, list[str]]) -> None:
    root, problems = planted
    with pytest.raises(PageError) as caught:
        build_site(root, root / "site")
    message = str(caught.value)
    assert message.startswith("the site did not build:\n15 problems in 3 pages:")
    assert _listed(message) == problems
    assert not (root / "site").exists()  # nothing half-built is left where the site goes


def test_as_warnings_they_stop_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    settings = root / "docs/data/lint.yml"
    settings.write_text(
        settings.read_text(encoding="utf-8").replace(": error", ": warning"), encoding="utf-8"
    )
    page = root / "docs/part-1/tiny.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nIt took 4.96 ms.\n", encoding="utf-8")
    line = page.read_text(encoding="utf-8").count("\n")
    checked = check_pages(root)
    assert checked.problems == []
    assert checked.warnings == [
        f'docs/part-1/tiny.md:{line}: typed-copy: "4.96 ms" is typed by hand and equals the '
        'recorded value decode.ms_long (4.958 ms): insert it with {{ value("decode.ms_long", '
        "decimals=2) }}"
    ]


def test_a_misspelt_check_in_the_settings_is_named(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "data").mkdir(parents=True)
    (docs / "data/lint.yml").write_text(
        "severity: {typed-copies: error, unit-twice: fatal}\nphrases: [GPU host]\n",
        encoding="utf-8",
    )
    with pytest.raises(PageError) as caught:
        load_settings(docs)
    assert str(caught.value) == (
        "docs/data/lint.yml: 3 problems:\n"
        "  - severity.typed-copies: not a check (did you mean 'typed-copy'?): the checks are "
        "typed-copy, unit-twice, same-value, tooling-phrase, source-address, fit-rule, fact-note, "
        "typed-date\n"
        "  - severity.unit-twice: Input should be 'error' or 'warning'\n"
        "  - phrases: unknown key"
    )


@pytest.fixture
def facts() -> Iterator[None]:
    """A source of facts, as the course's facts file plugs in: one call."""

    def card(_ctx: object) -> list[Known]:
        return [Known("cards.test-card.torch_total", 13_249_974_108, "B", True, "fact", "fact")]

    known_source(card)
    yield
    KNOWN_SOURCES.remove(card)


def test_a_typed_fact_is_named_with_its_macro(tmp_path: Path, facts: None) -> None:
    root = make_project(tmp_path / "project")
    page = root / "docs/part-1/tiny.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\nPyTorch sees 12.34 GiB of the card.\n",
        encoding="utf-8",
    )
    (entry,) = [e for e in scan(root / "docs") if e.src == "part-1/tiny.md"]
    found = check_page(root, entry, load_settings(root / "docs")).findings
    assert [str(f) for f in found] == [
        f"docs/part-1/tiny.md:{page.read_text(encoding='utf-8').count(chr(10))}: typed-copy: "
        '"12.34 GiB" is typed by hand and equals the fact cards.test-card.torch_total '
        '(13,249,974,108 B): insert it with {{ fact("cards.test-card.torch_total") }}'
    ]


def test_a_typed_fact_of_the_facts_file_is_found(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")  # with the course's facts file, as the kit is
    assert (root / FACTS_FILE).read_bytes() == (REPO / FACTS_FILE).read_bytes()
    total = load_facts(root).lookup("cards.rtx-4090.torch_total")
    assert total.value is not None
    gib = f"{convert(total.value, total.unit, 'GiB'):.2f} GiB"
    page = root / "docs/part-1/tiny.md"
    page.write_text(
        page.read_text(encoding="utf-8") + f"\nPyTorch sees {gib} of an RTX 4090.\n",
        encoding="utf-8",
    )
    (entry,) = [e for e in scan(root / "docs") if e.src == "part-1/tiny.md"]
    (found,) = check_page(root, entry, load_settings(root / "docs")).findings
    assert found.check == "typed-copy" and found.needle == gib
    assert "the fact cards.rtx-4090.torch_total (" in found.message
    assert found.message.endswith('{{ fact("cards.rtx-4090.torch_total") }}')


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("4.98 ms and 448.00 MiB, 24 GiB", ["4.98 ms", "448.00 MiB", "24 GiB"]),
        ("a 24 GB card, an A100-40GB, 80GB of HBM", []),  # names of cards, not quantities
        ("40 GB of weights; 2 × 36 × 8; 1.81× the tokens; 11.12x", ["40 GB", "1.81×", "11.12x"]),
        ("in 2024, step 3, Qwen3-8B, v0.3.36", []),  # no unit: never a copy
        (
            "72 %, 9.2 tok/s, 3.35 TB/s, 1,024 tokens",
            ["72 %", "9.2 tok/s", "3.35 TB/s", "1,024 tokens"],
        ),
    ],
)
def test_numbers_with_units_as_prose_writes_them(text: str, numbers: list[str]) -> None:
    assert [t.text for t in typed_numbers(text)] == numbers


@pytest.mark.parametrize("unit", [u for u in SCALE if u != "none"])
def test_a_typed_number_in_any_unit_of_the_record_is_found(unit: str) -> None:
    """Every unit a record may carry is read in prose, whatever its dimension is called."""
    (typed,) = typed_numbers(f"it came to 1,234.5 {unit} there")
    assert copies_of(typed, [Known("step.amount", 1234.5, unit)]) == [
        Known("step.amount", 1234.5, unit)
    ]


def test_a_facts_tooltip_is_held_to_the_pages_words(tmp_path: Path) -> None:
    """A fact's note shows in its tooltip, so a word about the tooling there is found, at the
    line of the page that inserts the fact."""
    root = make_project(tmp_path / "project")
    facts = (root / FACTS_FILE).read_text(encoding="utf-8").split("\n")
    at = facts.index("[cards.h200]")
    at += next(i for i, line in enumerate(facts[at:]) if line.startswith("torch_total ="))
    facts[at] = re.sub(r'note = "[^"]*"', 'note = "read on our GPU host"', facts[at])
    assert "our GPU host" in facts[at]
    (root / FACTS_FILE).write_text("\n".join(facts), encoding="utf-8")
    page = root / "docs/part-1/tiny.md"
    text = page.read_text(encoding="utf-8") + '\nThe H200: {{ fact("cards.h200.torch_total") }}.\n'
    page.write_text(text, encoding="utf-8")
    (entry,) = [e for e in scan(root / "docs") if e.src == "part-1/tiny.md"]
    found = [f for f in check_page(root, entry, load_settings(root / "docs")).findings]
    assert [(f.line, f.check) for f in found] == [(text.count("\n"), "fact-note")]
    assert found[0].message.startswith(
        "fact cards.h200.torch_total's tooltip: \"GPU host\" is about the course's tooling"
    )
    assert found[0].message.endswith("(reword it in lab/common/labkit/facts.toml)")
