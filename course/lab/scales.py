"""How a captured value should move on another GPU: a capture's `scales:` in lab.yml.

`course compare` and the lesson zip's compare.py (`package/compare_lab.py`) judge a run on
another card by it; the step's hash leaves it out (`run/plan.py`), since it changes nothing the
step runs.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from ..record.units import SCALE

ScaleKind = Literal["exact", "bandwidth", "compute", "memory", "free"]
BYTE_UNITS = tuple(u for u, (dim, _) in SCALE.items() if dim == "bytes")


class Scaling(BaseModel):
    """How a value should move on another GPU than the recorded run's: `course compare` and the
    zip's compare.py judge a learner's value by it. Written `scales: KIND`, or as a mapping for
    a value that moves with the card's memory in another way than in proportion."""

    # as schema.py's models: descriptions from the docstrings, for the JSON Schema and reference
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )

    kind: ScaleKind = Field(examples=["bandwidth"])
    """`exact`: the same to the byte on any machine (sizes); `bandwidth`: in proportion to the
    card's memory bandwidth (decode speeds); `compute`: to its bf16 FLOP/s (prefill);
    `memory`: to its memory (what a step that sizes itself to the card reserves); `free`:
    depends on more than the card's datasheet (timings of one-off work, Python overhead),
    shown and not judged. A time (unit ns, µs, ms, s, min or h) moves the other way: half the
    bandwidth, twice the seconds."""
    share: float | None = Field(default=None, ge=0, examples=[0.9])
    """With `memory`: the bytes the value gains for each byte more of card memory (0.9 for a
    cache given 90 % of the card, 0 for a peak that does not depend on the card's size);
    without it, the value is in proportion to the card's memory."""
    like: str | None = Field(default=None, examples=["room"])
    """With `memory`: another value of the same step that this one is in proportion to (the
    tokens a cache holds move as its bytes do)."""

    @model_validator(mode="before")
    @classmethod
    def _plain_kind(cls, raw: Any) -> Any:
        return {"kind": raw} if isinstance(raw, str) else raw

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """For editors: the short form `scales: KIND` is as good as the mapping."""
        mapping = handler(core)
        kinds = list(typing.get_args(ScaleKind))
        return {"anyOf": [{"type": "string", "enum": kinds}, mapping]}

    @model_validator(mode="after")
    def _memory_only(self) -> Scaling:
        if self.kind != "memory" and (self.share is not None or self.like is not None):
            raise ValueError("'share' and 'like' go with kind 'memory' only")
        if self.share is not None and self.like is not None:
            raise ValueError("give 'share' or 'like', not both")
        return self

    def misfit(self, unit: str, type_: str) -> str | None:
        """What is wrong with this declaration on a value of that unit and type, if anything."""
        if self.share is not None and unit not in BYTE_UNITS:
            return f"'share' needs a unit of bytes, not {unit!r}"
        if type_ == "str" and self.kind not in ("exact", "free"):
            return f"a text value is 'exact' or 'free', not {self.kind!r}"
        return None


class _Declares(Protocol):
    @property
    def scales(self) -> Scaling | None: ...


def like_problems(captures: Mapping[str, _Declares]) -> list[str]:
    """A `like:` must name a value of the same step that declares `memory` without a `like:`."""
    problems = []
    for name, capture in captures.items():
        other = capture.scales.like if capture.scales else None
        if other is None:
            continue
        target = captures.get(other)
        if target is None:
            close = difflib.get_close_matches(other, sorted(captures), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(
                f"capture.{name}.scales.like: '{other}' is not a value of this step{hint}"
            )
        elif target.scales is None or target.scales.kind != "memory" or target.scales.like:
            problems.append(
                f"capture.{name}.scales.like: '{other}' must declare `scales: memory` itself "
                "(with a share or none, not another 'like')"
            )
    return problems
