"""lab.yml's top-level settings beside its steps: a learner's setup time, the machine a cloud run
asks for, native builds, and the noise between hosts that `course diff` allows."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    # the attribute docstrings become the fields' descriptions: in the JSON Schema (`course
    # schema`, editors) and in the lab.yml reference page, which are generated from these models
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )


class Setup(_Strict):
    """What a learner spends before the first step: installs and downloads, declared in seconds."""

    install_seconds: float = Field(default=0.0, ge=0, examples=[180])
    """Seconds a learner spends installing the lab's requirements (added to the page's
    hands-on time)."""
    download_seconds: float = Field(default=0.0, ge=0, examples=[60])
    """Seconds a learner spends downloading weights or data (added to the hands-on time)."""


class Resources(_Strict):
    """What a lab needs from a rented machine; `course run --all --via skypilot` asks for it."""

    gpu: str | None = Field(default=None, examples=["H100"])
    """The GPU kind, as SkyPilot names accelerators (H200, H100, A100-80GB, L4, ...); none:
    CPU only. The card the lesson's page is written for: the page shows the newest good run on
    this kind, and `course diff` compares the two newest; runs on other cards stay records."""
    count: int = Field(default=1, ge=1, examples=[2])
    """How many of that GPU."""
    disk_gb: int | None = Field(default=None, ge=1, examples=[200])
    """Disk size in GB (weights and caches); none: the cloud's default."""


class Build(_Strict):
    """A native engine built from its released source on the run's host (e.g. llama.cpp), once
    per version and GPU kind, kept outside the record and reused by every later run there."""

    package: str = Field(examples=["llama-cpp-python"])
    """The package on the registry whose source distribution carries the source (llama.cpp
    travels inside `llama-cpp-python`); `scripts/fetch-source.sh` fetches and slims it."""
    version: str = Field(examples=["0.3.16"])
    """The release built by default; `course run --engine NAME==VERSION` picks another."""
    command: str = Field(examples=["bash build_llama.sh"])
    """The build, run in the lab folder with $SOURCE (the source archive), $PREFIX (where the
    programs go: $PREFIX/bin) and $DEVICE (`cuda` or `cpu`) set."""
    timeout: float = Field(default=1800.0, gt=0, examples=[3600])
    """Seconds the build may take."""
    cpu_seconds: float | None = Field(default=None, gt=0, examples=[1238])
    """Seconds the build took for the CPU on a machine of 2 cores (declared: no record keeps
    it), for START-HERE.md's way without a GPU; the GPU build's time comes from the record."""
    programs: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]] = Field(
        default=[], examples=[["llama-server", "llama-bench", "llama-perplexity"]]
    )
    """The programs the lab's steps run from the build (`$PREFIX/bin/NAME`). A build kept on the
    host by another lab's command that lacks one of them is made again with this lab's command;
    a build that does not make them all fails, naming the missing ones."""


MOST_APART = 300
"""The most a lab may declare its values apart between hosts, in percent: one host's value four
times the other's; more than that is a typo or not the same measurement."""


class Noise(_Strict):
    """How far this lab's timed values move between two honest runs (nothing changed but the
    host), for `course diff`: a value whose quartiles no longer overlap but which moved by no
    more than this (its pattern's percent under `values`, else `between_hosts`) is within noise
    between hosts, not moved."""

    between_hosts: float = Field(default=0.0, ge=0, le=MOST_APART, examples=[2])
    """Percent a timed value may move between two hosts of the same GPU kind and still count as
    noise, as two runs of the lab measured it (`bench/stability.py`), the larger run's value
    over the smaller's (100: one host's value twice the other's); 0: every move beyond the
    quartiles is listed. The lesson page should say what such a move depends on."""
    values: dict[str, Annotated[float, Field(ge=0, le=MOST_APART)]] = Field(
        default={}, examples=[{"concurrency.tok_s_*": 50, "decode-speed.eager_*": 15}]
    )
    """Percent for the values that move between hosts more than the others (a Python
    scheduler's throughput follows the host CPU; a GPU-bound speed hardly moves), by patterns
    on `step.value` (`*` any characters, `?` one, `[...]` one of them): the first pattern that
    matches a value, in the order written, decides it instead of `between_hosts`; each percent
    is from 0 to `MOST_APART` (a host-bound wait that doubles between hosts: 100). A pattern
    that matches no captured value of the lab is refused (a typo would silently do nothing)."""
    source: str | None = Field(default=None, examples=["2026-12-01T222234Z-h200 against ..."])
    """The runs that measured it, for the next author."""

    @field_validator("values", mode="before")
    @classmethod
    def _percents(cls, values: Any) -> Any:
        """Each pattern's percent is a number from 0 to `MOST_APART`, the error naming the
        pattern."""
        if not isinstance(values, dict):
            return values
        for pattern, pct in values.items():
            number = isinstance(pct, (int, float)) and not isinstance(pct, bool)
            if not number or not 0 <= pct <= MOST_APART:
                raise ValueError(f"'{pattern}': {pct!r} is not a percent from 0 to {MOST_APART}")
        return values
