"""Secrets kept out of records and screens: which values are secrets, and masking them exactly.

A secret is the value of a variable whose name says TOKEN, KEY, SECRET or PASSWORD, when the value
can be one: long enough, and not a boolean, a number, a path or a common word (so that
`TOKENIZERS_PARALLELISM=false` does not turn every "false" into `***`). Wherever they appear, the
values are masked, and so are their base64 and URL-encoded forms and anything shaped like a known
kind of token (Hugging Face `hf_…`, OpenAI `sk-…`, GitHub `ghp_…`, AWS `AKIA…`), set or not.

Captures read the real output; the values recorded are masked. A kept file stays what it was:
JSON is masked inside its strings, and a secret that sits where masking would break a file fails
the step (`MaskError`) instead of recording a broken file.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from ..errors import RunError

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
MASK = "***"
MIN_LENGTH = 6
"""Shorter values are not treated as secrets (masking them would hide ordinary words)."""
MIN_ENCODED = 8
"""Encoded fragments shorter than this are not masked (too likely to occur by chance)."""

COMMON = frozenset(
    """true false yes no on off none null nil auto default enabled disabled enable disable
    always never required optional public private bearer basic token secret password key
    json yaml text plain local remote debug info warning error fatal verbose quiet fast slow
    strict lenient legacy stable latest main master release test testing production staging
    development dev prod cpu gpu cuda float16 bfloat16 float32 int8 int4 sha256 sha512 utf-8
    utf8 ascii unset empty dummy example placeholder changeme""".split()
)
"""Common words a variable named like a secret often holds; never masked."""

_NUMBER = re.compile(r"^[+-]?(\d[\d_,]*)?(\.\d+)?([eE][+-]?\d+)?[a-zA-Z%]{0,3}$")
_PATH = re.compile(r"^(/|~/|\./|\.\./)\S*$")

# Token shapes, masked wherever they appear; each must be long and specific enough not to match
# ordinary words (a token is preceded by neither a letter nor a digit).
TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|sk-(?:proj-|ant-|svcacct-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r")"
)


class MaskError(RunError):
    """A kept file whose secret cannot be masked without breaking the file."""


def can_be_secret(value: str) -> bool:
    """Whether a value of a variable named like a secret is treated as one."""
    text = value.strip()
    if len(text) < MIN_LENGTH or text.lower() in COMMON:
        return False
    if _NUMBER.match(text) or _PATH.match(text):
        return False
    return True


def secret_values(*envs: Mapping[str, str]) -> list[str]:
    """Values of variables whose names say TOKEN, KEY, SECRET or PASSWORD and that can be
    secrets, longest first."""
    found = {
        value
        for env in envs
        for name, value in env.items()
        if SECRET_NAME.search(name) and can_be_secret(value)
    }
    return sorted(found, key=len, reverse=True)


def encoded_forms(secret: str) -> set[str]:
    """The ways a secret shows up encoded: URL-encoded, and base64 (standard and URL-safe) at each
    of the three alignments it can take inside a longer encoded text (as in `user:secret`)."""
    raw = secret.encode()
    forms = {quote(secret, safe=""), quote_plus(secret, safe="")}
    forms |= {f.lower() for f in forms if "%" in f}  # some encoders write %2f, not %2F
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        # keep the characters that depend on the secret's bytes alone
        first = -(-8 * shift // 6)
        last = 8 * (shift + len(raw)) // 6
        core = encoded[first:last]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    forms.add(base64.b64encode(raw).decode())
    return {f for f in forms if f != secret and len(f) >= MIN_ENCODED}


class Redactor:
    """Replaces every secret, its encoded forms and every known token shape with `***`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = [s for s in secrets if s]
        forms = set(self.secrets)
        for secret in self.secrets:
            forms |= encoded_forms(secret)
        literal = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
        self._pattern = re.compile(
            f"{literal}|{TOKEN_SHAPES.pattern}" if literal else TOKEN_SHAPES.pattern
        )

    @classmethod
    def from_environment(cls, extra: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for this process's environment plus a run's and its steps' variables."""
        return cls(secret_values(os.environ, extra or {}))

    def __call__(self, text: str) -> str:
        """The text with every secret masked."""
        return self._pattern.sub(MASK, text)

    def value(self, value: object) -> object:
        """A captured value with secrets masked (strings only)."""
        return self(value) if isinstance(value, str) else value

    def kept(self, text: str, name: str) -> str:
        """A kept text file, masked so that it stays what it was: a JSON file is masked inside its
        strings only; MaskError naming the file when a secret sits where masking would break it."""
        masked = self(text)
        try:
            data = json.loads(text)
        except ValueError:
            return masked  # not JSON: plain text stays plain text
        expected = self._walk(data)
        if masked == text and expected == data:
            return text
        try:
            if json.loads(masked) == expected:
                return masked  # masked in place, the layout kept
        except ValueError:
            pass
        dumped = json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
        if self(dumped) != dumped:
            raise MaskError(
                f"{name}: a secret sits outside the JSON strings, where masking it would break "
                "the file; the file is not kept (remove the secret from it)"
            )
        return dumped  # a secret written escaped inside a string: masked on the parsed data

    def _walk(self, data: Any) -> Any:
        if isinstance(data, str):
            return self(data)
        if isinstance(data, list):
            return [self._walk(item) for item in data]
        if isinstance(data, dict):
            return {self(str(k)): self._walk(v) for k, v in data.items()}
        return data
