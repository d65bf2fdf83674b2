"""The course's facts file (lab/common/labkit/facts.toml) as typed models: the repository's own
file, and wrong files refused with every problem named by its key."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from support import REPO

from course.errors import FactsError
from course.lab.facts import FACTS_FILE, load_facts, parse_facts
from course.record.units import UNITS

TEXT = (REPO / FACTS_FILE).read_text(encoding="utf-8")


def problems(text: str) -> list[str]:
    with pytest.raises(FactsError) as caught:
        parse_facts(text)
    assert caught.value.path == "lab/common/labkit/facts.toml"
    return caught.value.problems


def test_the_repositorys_facts_load_and_name_every_fact() -> None:
    facts = load_facts(REPO)
    assert load_facts(REPO) is facts  # read once while the file is unchanged
    found = facts.lookup("cards.rtx-4090.torch_total")
    assert (found.value, found.unit, found.date) == (23.52, "GiB", date(2026, 12, 1))
    measured = facts.lookup("cards.h200.torch_total")
    assert measured.cite == "measured in run 2026-11-30T055036Z-h200 (gpu-memory, paged.total)"
    heads = facts.lookup("models.qwen3-8b.num_key_value_heads")
    assert (heads.value, heads.cite) == (
        8,
        "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
    )
    price = facts.lookup("cards.rtx-4090.prices.runpod-secure")
    assert price.price is not None and price.price.per_hour == 0.89
    assert facts.lookup("engines.vllm.gpu_memory_utilization").value == 0.92
    card = facts.card_named("NVIDIA GeForce RTX 4090")
    assert card is not None and card.label == "RTX 4090"


def test_a_wrong_name_is_refused_with_the_close_match() -> None:
    facts = load_facts(REPO)
    with pytest.raises(FactsError) as caught:
        facts.lookup("cards.rtx-4090.torch_totl")
    assert caught.value.problems == [
        "no fact 'cards.rtx-4090.torch_totl' in lab/common/labkit/facts.toml (did you mean"
        " 'cards.rtx-4090.torch_total'?)"
    ]
    with pytest.raises(FactsError) as table:
        facts.lookup("models.qwen3-8b")
    assert table.value.problems[0].startswith(
        "'models.qwen3-8b' in lab/common/labkit/facts.toml is a table, not a fact: name one of its"
        " keys (name, model_type, source, date, num_hidden_layers,"
    )


def test_a_bad_facts_file_names_the_file_and_every_key() -> None:
    run = (
        ', run = "2026-11-30T081310Z-h200", lesson = "prefill-decode",'
        ' value_of = "limits.bandwidth"'
    )
    l40s = 'source = "https://resources.nvidia.com/en-us-l40s'
    text = (
        TEXT.replace("torch_total = { value = 23.52", "torch_totl = { value = 23.52")
        .replace("per_hour = 3.59", "per_hour = -3.59")
        .replace(run, "")
        .replace(f'unit = "TFLOP/s", {l40s}', f'unit = "TFLOPS", {l40s}')
        .replace('card = "a100-40gb"', 'card = "a100-40g"')
    )
    assert sorted(problems(text)) == sorted([
        "cards.rtx-4090.torch_totl: unknown key 'torch_totl' (did you mean 'torch_total'?)",
        "cards.h200.prices.runpod-community.per_hour: Input should be greater than 0",
        "cards.h200.measured_bandwidth: a measured fact names its run, lesson and value_of",
        "cards.l40s.bf16_flops.unit: Input should be "
        + ", ".join(f"'{u}'" for u in UNITS[:-1])
        + f" or '{UNITS[-1]}'",
    ])  # fmt: skip
    # once the fields are right, references between tables are checked
    assert problems(TEXT.replace('card = "a100-40gb"', 'card = "a100-40g"')) == [
        "crosschecks.vllm-a100: no cards.a100-40g"
    ]


def test_a_file_that_is_not_toml_or_is_missing_says_where(tmp_path: Path) -> None:
    said = problems(TEXT.replace("[cards.l40s]", "[cards.l40s"))
    assert len(said) == 1 and said[0].startswith("not valid TOML: ") and "line " in said[0]
    with pytest.raises(FactsError) as caught:
        load_facts(tmp_path)
    assert str(caught.value) == (
        "lab/common/labkit/facts.toml: 1 problem:\n  - no such file (the course's facts live in"
        " lab/common/labkit/facts.toml)"
    )
