"""The page checks' settings, `docs/data/lint.yml`: each check's severity, the words about the
tooling learners must not read, and the words of a "how many fit" count and of its engine rule.

Without the file every check is an error and no phrase is forbidden.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...errors import PageError
from ...lab.schema import suggest
from ...record import yamlfast

SETTINGS = Path("data") / "lint.yml"
"""Where the settings lie inside docs/."""
Severity = Literal["error", "warning"]
Check = Literal[
    "typed-copy",
    "unit-twice",
    "same-value",
    "tooling-phrase",
    "source-address",
    "fit-rule",
    "fact-note",
    "typed-date",
]
CHECKS: tuple[str, ...] = get_args(Check)
"""Every check, as findings and the settings name it."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tooling(_Model):
    """Words about the course's tooling, never in what a learner reads."""

    phrases: list[str] = []
    """Found whole-word and case-insensitively."""
    patterns: list[str] = []
    """Regular expressions, found case-insensitively."""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return patterns

    def regex(self) -> re.Pattern[str] | None:
        """One expression finding any of them; None when there are none."""
        words = "|".join(re.escape(p) for p in self.phrases)
        parts = ([rf"(?<!\w)(?:{words})(?!\w)"] if words else []) + self.patterns
        return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE) if parts else None


class Fit(_Model):
    """What a "how many fit" count is, and the words that name an engine's memory rule."""

    counts: list[str] = ["conversations", "conversation", "requests"]
    """Nouns a count of what fits is followed by."""
    verbs: list[str] = ["fit", "fits", "hold", "holds", "at once"]
    """Words that make the sentence about what fits."""
    rules: list[str] = ["vLLM", "transformers", "llama.cpp"]
    """Words that name the rule (any one of them in the sentence is enough)."""


class Settings(_Model):
    """docs/data/lint.yml."""

    severity: dict[Check, Severity] = Field(default_factory=dict)
    """Each check's severity; a check not named is an error."""
    tooling: Tooling = Tooling()
    fit: Fit = Fit()

    def level(self, check: str) -> Severity:
        """A check's severity."""
        for name, severity in self.severity.items():
            if name == check:
                return severity
        return "error"


def load_settings(docs: Path) -> Settings:
    """docs/data/lint.yml, validated; PageError naming the file and every problem."""
    path = docs / SETTINGS
    shown = f"docs/{SETTINGS.as_posix()}"
    if not path.is_file():
        return Settings()
    try:
        raw = yamlfast.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PageError(f"{shown}: not YAML: {exc}") from None
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise PageError(f"{shown}: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    """Every problem of the file with its key; a misspelt check or key with its close match."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        message = error["msg"]
        if loc[-1] == "[key]" and loc[0] == "severity":  # a check's name misspelt
            loc = loc[:-1]
            message = (
                f"not a check{suggest(loc[-1], list(CHECKS))}: the checks are {', '.join(CHECKS)}"
            )
        elif error["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"  - {'.'.join(loc) or '(top)'}: {message}")
    noun = "problem" if len(lines) == 1 else "problems"
    return f"{len(lines)} {noun}:\n" + "\n".join(lines)
