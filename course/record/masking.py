"""Secrets kept out of records and screens: which values are secrets, and masking them exactly.

A secret is the value of a variable whose name says TOKEN, KEY, SECRET or PASSWORD, when the value
can be one: long enough, and not a boolean, a number, a path or a common word (so that
`TOKENIZERS_PARALLELISM=false` does not turn every "false" into `***`). Wherever they appear, the
values are masked, and so are their base64 and URL-encoded forms and anything shaped like a known
kind of token (Hugging Face `hf_…`, OpenAI `sk-…`, GitHub `ghp_…`, AWS `AKIA…`), set or not.

A secret is found whole, with line breaks inside it (printed in pieces on consecutive lines, or in
base64 wrapped at 76 columns), and in two pieces of at least 4 characters anywhere in one text
when each piece stands alone (not inside a longer word).

Captures read the real output; the values recorded are masked. A kept file stays what it was:
JSON is masked inside its strings, UTF-16 and UTF-32 (with a byte-order mark) are masked and
written back in their encoding, and a secret that sits where masking would break a file (outside
JSON's strings, or in a file that is not text) fails the step (`MaskError`) instead of recording
a broken file or the secret.
"""

from __future__ import annotations

import base64
import codecs
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
MIN_PIECE = 4
"""A secret printed in two pieces is masked when each piece has at least this many characters."""
_BREAK = "(?:\r?\n)?"
_LINE = re.compile(r"[^\r\n]+")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

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
        # a line break may sit between any two characters (pieces on two lines, wrapped base64)
        literal = "|".join(
            _BREAK.join(re.escape(c) for c in f) for f in sorted(forms, key=len, reverse=True)
        )
        self._pattern = re.compile(
            f"{literal}|{TOKEN_SHAPES.pattern}" if literal else TOKEN_SHAPES.pattern
        )

    @classmethod
    def from_environment(cls, extra: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for this process's environment plus a run's and its steps' variables."""
        return cls(secret_values(os.environ, extra or {}))

    def __call__(self, text: str, pieces: frozenset[str] | None = None) -> str:
        """The text with every secret masked (and the `pieces` of secrets found in a text that
        holds this one, default: this one)."""
        masked = self._pattern.sub(lambda m: _LINE.sub(MASK, m.group(0)), text)
        found = self.pieces(masked) if pieces is None else pieces
        if not found:
            return masked
        bounded = "|".join(re.escape(p) for p in sorted(found, key=len, reverse=True))
        return re.sub(f"(?<![\\w.+/=-])(?:{bounded})(?![\\w.+/=-])", MASK, masked)

    def pieces(self, text: str) -> frozenset[str]:
        """Pieces of a secret printed apart in the text: two words, each at least MIN_PIECE
        characters and standing alone, that put together make the secret."""
        found: set[str] = set()
        for secret in self.secrets:
            if len(secret) < 2 * MIN_PIECE:
                continue
            if secret[:MIN_PIECE] not in text or secret[-MIN_PIECE:] not in text:
                continue  # each piece holds one end of the secret
            words = set(re.findall(r"[\w.+/=-]+", text))
            for cut in range(MIN_PIECE, len(secret) - MIN_PIECE + 1):
                head, rest = secret[:cut], secret[cut:]
                if head in words and rest in words:
                    found |= {head, rest}
        return frozenset(found)

    def value(self, value: object) -> object:
        """A captured value with secrets masked (strings only)."""
        return self(value) if isinstance(value, str) else value

    def kept_file(self, data: bytes, name: str) -> bytes:
        """A kept file's bytes, masked: UTF-8 text, or UTF-16 and UTF-32 with a byte-order mark,
        written back in their encoding; anything else is kept as it is when no secret is in its
        bytes (read as Latin-1 and as UTF-16). MaskError naming the file otherwise."""
        for bom, encoding in _BOMS:
            if data.startswith(bom):
                try:
                    text = data[len(bom) :].decode(encoding)
                except UnicodeDecodeError as exc:
                    raise MaskError(
                        f"{name}: starts as {encoding.upper()} but is not ({exc.reason} at byte "
                        f"{exc.start + len(bom)}), so it cannot be scanned for secrets; the file "
                        "is not kept"
                    ) from None
                masked = self.kept(text, name)
                return data if masked == text else bom + masked.encode(encoding)
        try:
            text = data.decode("utf-8")
            if "\0" in text:  # UTF-16 without its mark reads as UTF-8 with a NUL in each pair
                raise UnicodeDecodeError("utf-8", data, text.index("\0"), len(data), "NUL")
        except UnicodeDecodeError as exc:
            views = [data.decode("latin-1")]
            views += [
                data[i:].decode(e, "replace") for i in (0, 1) for e in ("utf-16-le", "utf-16-be")
            ]
            if any(self(view) != view for view in views):
                raise MaskError(
                    f"{name}: a secret is in it, and it is not UTF-8 text (byte "
                    f"0x{data[exc.start]:02x} at {exc.start}), so masking could break it; the "
                    "file is not kept (write it as UTF-8 text)"
                ) from None
            return data  # a binary file (a figure) with no secret in it
        masked = self.kept(text, name)
        return data if masked == text else masked.encode("utf-8")

    def kept(self, text: str, name: str) -> str:
        """A kept text file, masked so that it stays what it was: a JSON file is masked inside its
        strings only; MaskError naming the file when a secret sits where masking would break it."""
        pieces = self.pieces(self._pattern.sub(MASK, text))
        masked = self(text, pieces)
        try:
            data = json.loads(text)
        except ValueError:
            return masked  # not JSON: plain text stays plain text
        expected = self._walk(data, pieces)
        if masked == text and expected == data:
            return text
        try:
            if json.loads(masked) == expected:
                return masked  # masked in place, the layout kept
        except ValueError:
            pass
        dumped = json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
        if self(dumped, pieces) != dumped:
            raise MaskError(
                f"{name}: a secret sits outside the JSON strings, where masking it would break "
                "the file; the file is not kept (remove the secret from it)"
            )
        return dumped  # a secret written escaped inside a string: masked on the parsed data

    def _walk(self, data: Any, pieces: frozenset[str]) -> Any:
        if isinstance(data, str):
            return self(data, pieces)
        if isinstance(data, list):
            return [self._walk(item, pieces) for item in data]
        if isinstance(data, dict):
            return {self(str(k), pieces): self._walk(v, pieces) for k, v in data.items()}
        return data
