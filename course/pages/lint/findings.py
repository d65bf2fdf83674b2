"""What a page check found: the file, the line, the check and what to do."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One problem a page check found."""

    file: str
    """As messages name it: `docs/part-2/kv-cache.md`, `lab/kv-cache/README.md`."""
    line: int
    check: str
    """The check's name (`typed-copy`, ...), as docs/data/lint.yml names it."""
    message: str
    needle: str = ""
    """The text found, to place the finding on its line where only a range of lines is known
    (a string of a data file)."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.check}: {self.message}"


def quoted(text: str, limit: int = 90) -> str:
    """Text as a message quotes it: one line, at most `limit` characters."""
    flat = " ".join(text.split())
    return f'"{flat if len(flat) <= limit else flat[: limit - 1] + "…"}"'
