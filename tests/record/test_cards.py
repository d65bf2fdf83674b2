"""A GPU kind as lab.yml and SkyPilot name it, against the name PyTorch recorded for a run's GPU."""

from __future__ import annotations

import pytest

from course.record.models import card_matches


@pytest.mark.parametrize(
    ("kind", "name", "matches"),
    [
        ("H200", "NVIDIA H200", True),
        ("h200", "NVIDIA H200", True),
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("H200", "NVIDIA H100 80GB HBM3", False),
        ("H100", "NVIDIA H100 NVL", True),
        ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
        ("A100-80GB", "NVIDIA A100-SXM4-40GB", False),
        ("L4", "NVIDIA L4", True),
        ("L4", "NVIDIA L40S", False),  # a word, not a prefix
        ("RTX4090", "NVIDIA GeForce RTX 4090", True),
        ("H100", "none", False),
        ("", "NVIDIA H200", False),
    ],
)
def test_a_kind_names_a_gpu_by_its_words(kind: str, name: str, matches: bool) -> None:
    assert card_matches(kind, name) is matches
