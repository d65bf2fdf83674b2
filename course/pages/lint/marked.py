"""A page's text as a reader reads it, each character knowing the source line it came from and who
wrote it: the author (typed prose), a value macro (a recorded number), another macro (a terminal,
a listing, a check), or markup (code, HTML tags, link targets).

The page is rendered once with markers: the start of every source line that is not inside a
macro call gets a line marker, and each macro's output is wrapped in a marker naming the macro.
`prose()` turns the marked text into a `Prose`, and `unmark()` gives the text the build would
have made.
"""

from __future__ import annotations

import bisect
import functools
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import jinja2

from ..claims import plain_text
from ..context import PageContext
from ..macros import ANSWERABLE, NUMBER_FIELD, bound, numbers_in_text
from ..render import Rendering

LINE, VALUE, OUTPUT, CLOSE, SEP, OK = "\ue000", "\ue001", "\ue002", "\ue003", "\ue004", "\ue005"
CLAIM, CLAIM_END = "\ue006", "\ue007"
"""Private-use characters: no page writes them."""
_MARK = re.compile(
    f"{LINE}(\\d+){SEP}|{VALUE}(\\d+){SEP}|{OUTPUT}(\\w+){SEP}|{CLOSE}|{CLAIM}(\\d+){SEP}|{CLAIM_END}"
)
_ANY_MARK = re.compile(
    f"{LINE}\\d+{SEP}|{VALUE}\\d+{SEP}|{OUTPUT}\\w+{SEP}|{CLOSE}|{OK}|{CLAIM}\\d+{SEP}|{CLAIM_END}"
)
TYPED_OK = re.compile(r"\{#-?\s*typed:\s*ok\s*-?#\}")
"""`{# typed: ok #}` after a number: typed on purpose (a product's name, a setting)."""

VALUES = frozenset({"value", "fact", "line_count"})
"""Macros whose output is a recorded number or a fact."""
PROSE = frozenset({"lesson_link", "lesson_number"})
"""Macros whose output is the author's own prose (a claim's sentence, a lesson's title)."""


@dataclass(frozen=True)
class Shown:
    """A number a value macro printed: its text and what it was asked for."""

    text: str
    expression: str


@dataclass
class Marks:
    """What one marked rendering printed through value macros, by index."""

    shown: list[Shown] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    """Each claim's condition, by index."""


@dataclass(frozen=True)
class Span:
    """A stretch of the text a macro printed."""

    start: int
    end: int
    macro: str
    """The macro's name ('value', 'terminal', ...)."""
    line: int
    shown: Shown | None = None
    """For a value macro: what it printed and was asked for."""


@dataclass
class Prose:
    """Text as a reader reads it: each character's source line, and whether the author typed it."""

    file: str
    """The file as messages name it (`docs/part-2/kv-cache.md`)."""
    text: str = ""
    lines: list[int] = field(default_factory=list)
    typed: list[bool] = field(default_factory=list)
    """True where the author typed the character as prose (not markup, not a macro's output)."""
    spans: list[Span] = field(default_factory=list)
    ok: set[int] = field(default_factory=set)
    """Positions right after a `{# typed: ok #}` marker."""
    claims: list[tuple[int, int, str]] = field(default_factory=list)
    """(start, end, condition) of each claim's sentence."""
    _span_starts: list[int] = field(default_factory=list, repr=False)

    def claim_at(self, position: int) -> str | None:
        """The condition of the claim whose sentence holds a position, if any."""
        inner = [c for c in self.claims if c[0] <= position < c[1]]
        return min(inner, key=lambda c: c[1] - c[0])[2] if inner else None

    def line_at(self, position: int) -> int:
        """The source line of a position of the text."""
        return self.lines[min(position, len(self.lines) - 1)] if self.lines else 1

    def all_typed(self, start: int, end: int) -> bool:
        """Whether the author typed every character of text[start:end]."""
        return all(self.typed[start:end])

    def span_at(self, position: int) -> Span | None:
        """The macro output a position lies in, if any."""
        index = bisect.bisect_right(self._starts(), position) - 1
        if index >= 0 and position < self.spans[index].end:
            return self.spans[index]
        return None

    def spans_in(self, start: int, end: int) -> list[Span]:
        """The macro outputs that begin in text[start:end]."""
        starts = self._starts()
        return self.spans[bisect.bisect_left(starts, start) : bisect.bisect_left(starts, end)]

    def _starts(self) -> list[int]:
        if len(self._span_starts) != len(self.spans):
            self._span_starts = [span.start for span in self.spans]
        return self._span_starts


def mark_lines(source: str, first_line: int) -> str:
    """The source with a line marker at the start of each line outside a macro call or tag;
    `{# typed: ok #}` becomes the OK marker, so that it stays where the author put it."""
    source = TYPED_OK.sub(OK, source)
    inside: set[int] = set()  # lines (1-based in `source`) whose start lies inside a tag
    depth = 0
    for lineno, kind, value in jinja2.Environment().lexer.tokeniter(source, "page"):
        if kind in ("variable_begin", "block_begin", "comment_begin", "linecomment_begin"):
            depth += 1
        elif kind in ("variable_end", "block_end", "comment_end", "linecomment_end"):
            depth -= 1
        elif depth > 0:
            inside.update(range(lineno + 1, lineno + 1 + value.count("\n")))
    lines = source.split("\n")
    return "\n".join(
        line if n in inside else f"{LINE}{n + first_line - 1}{SEP}{line}"
        for n, line in enumerate(lines, start=1)
    )


def marking_macros(ctx: PageContext, marks: Marks) -> dict[str, Callable[..., str]]:
    """The page's macros, each output wrapped in a marker naming the macro (prose macros as they
    are; a figure as its alt text and caption, the numbers in them marked as values)."""
    plain = bound(ctx)

    def value_like(func: Callable[..., str], *args: Any, **kwargs: Any) -> str:
        out = func(*args, **kwargs)
        asked = str(args[0]) if args else str(kwargs.get("expression", ""))
        marks.shown.append(Shown(plain_text(out), asked))
        return f"{VALUE}{len(marks.shown) - 1}{SEP}{out}{CLOSE}"

    def claim(func: Callable[..., str], *args: Any, **kwargs: Any) -> str:
        marks.claims.append(str(args[0]) if args else str(kwargs.get("condition", "")))
        return f"{CLAIM}{len(marks.claims) - 1}{SEP}{func(*args, **kwargs)}{CLAIM_END}"

    def output(name: str, func: Callable[..., str], *args: Any, **kwargs: Any) -> str:
        return f"{OUTPUT}{name}{SEP}{func(*args, **kwargs)}{CLOSE}"

    def figure(func: Callable[..., str], *args: Any, **kwargs: Any) -> str:
        func(*args, **kwargs)  # its problems, collected as always, named by the call as written
        given = dict(zip(("name", "alt", "caption"), args, strict=False)) | kwargs
        alt, caption = given.get("alt") or "", given.get("caption") or ""
        return f"{_fields(ctx, marks, str(alt))}\n{_fields(ctx, marks, str(caption))}"

    wrapped: dict[str, Callable[..., str]] = {}
    for name, func in plain.items():
        if name in PROSE:
            wrapped[name] = func
        elif name in VALUES:
            wrapped[name] = functools.partial(value_like, func)
        elif name == "figure":
            wrapped[name] = functools.partial(figure, func)
        elif name == "claim":
            wrapped[name] = functools.partial(claim, func)
        else:
            wrapped[name] = functools.partial(output, name, func)
    return wrapped


def _fields(ctx: PageContext, marks: Marks, text: str) -> str:
    """Alt text or a caption with each `{expression:...}` marked as a value."""

    def field_(match: re.Match[str]) -> str:
        try:
            shown = numbers_in_text(ctx, match.group(0))
        except ANSWERABLE:  # the figure macro has reported it already
            shown = match.group(0)
        marks.shown.append(Shown(shown, match.group(1).strip()))
        return f"{VALUE}{len(marks.shown) - 1}{SEP}{html.escape(shown)}{CLOSE}"

    return NUMBER_FIELD.sub(field_, text)


def marking(first_line: int, marks: Marks) -> Rendering:
    """The rendering that marks lines and macro outputs (`render_page(..., how=...)`)."""
    return Rendering(
        source=lambda body: mark_lines(body, first_line),
        macros=lambda ctx: marking_macros(ctx, marks),
        plain=unmark,
    )


def unmark(text: str) -> str:
    """The text without any marker: what the build makes."""
    return _ANY_MARK.sub("", text)


_CODE_FENCE = re.compile(r"^\s*(```|~~~)")
_TAG = re.compile(r"<!--.*?-->|</?[a-zA-Z][^<>]*>", re.DOTALL)
"""HTML the author typed (or a claim wrapped its sentence in): not read, left out of the text."""
# markup inside typed prose: inline code, link targets, attribute lists, entities
_MARKUP = re.compile(r"`[^`\n]*`|\]\([^()\s]*\)|\{:?\s*[#.][^{}]*\}|&[a-z]+;")


def prose(file: str, marked: str, marks: Marks, first_line: int = 1) -> Prose:
    """The marked text as a `Prose`: macro outputs as plain text, each character with its line."""
    out = Prose(file)
    chunks: list[str] = []
    size = 0
    line, position = first_line, 0
    claims: list[tuple[int, str]] = []

    def add(text: str, typed: bool) -> None:
        nonlocal size
        for number, piece in enumerate(text.split(OK)):
            if number:
                out.ok.add(size)  # after a `{# typed: ok #}`
            chunks.append(piece)
            out.lines += [line] * len(piece)
            out.typed += [typed] * len(piece)
            size += len(piece)

    while position < len(marked):
        found = _MARK.search(marked, position)
        if found is None:
            add(marked[position:], True)
            break
        add(marked[position : found.start()], True)
        position = found.end()
        if found.group(1) is not None:
            line = int(found.group(1))
        elif found.group(4) is not None:
            claims.append((size, marks.claims[int(found.group(4))]))
        elif found.group(0) == CLAIM_END:
            if claims:
                start, condition = claims.pop()
                out.claims.append((start, size, condition))
        elif found.group(2) is not None or found.group(3) is not None:
            end = marked.find(CLOSE, position)
            end = len(marked) if end < 0 else end
            shown = marks.shown[int(found.group(2))] if found.group(2) is not None else None
            text = plain_text(unmark(marked[position:end]))
            start = size
            add(text, False)
            out.spans.append(Span(start, size, found.group(3) or "value", line, shown))
            position = end + 1
    out.text = "".join(chunks)
    _drop_tags(out)
    _untype_markup(out)
    return out


def _drop_tags(out: Prose) -> None:
    """Leave out the HTML tags the author typed, keeping every position's line and owner."""
    cuts = [
        (m.start(), m.end()) for m in _TAG.finditer(out.text) if out.all_typed(m.start(), m.end())
    ]
    if not cuts:
        return
    bounds = [0, *(edge for cut in cuts for edge in cut), len(out.text)]
    kept = list(zip(bounds[::2], bounds[1::2], strict=True))  # between the cuts
    out.text = "".join(out.text[a:b] for a, b in kept)
    out.lines = [n for a, b in kept for n in out.lines[a:b]]
    out.typed = [t for a, b in kept for t in out.typed[a:b]]

    def moved(position: int) -> int:
        """Where a position lands once the cuts before it are gone."""
        gone = 0
        for start, end in cuts:
            if position <= start:
                break
            gone += min(position, end) - start
        return position - gone

    out.spans = [replace(s, start=moved(s.start), end=moved(s.end)) for s in out.spans]
    out.claims = [(moved(a), moved(b), condition) for a, b, condition in out.claims]
    out.ok = {moved(p) for p in out.ok}


def _untype_markup(out: Prose) -> None:
    """Code blocks, inline code and link targets the author typed are not prose."""
    fenced, start = False, 0
    for line in out.text.split("\n"):
        end = start + len(line)
        if _CODE_FENCE.match(line) and out.all_typed(start, min(end, start + 3)):
            fenced = not fenced
            out.typed[start:end] = [False] * (end - start)
        elif fenced:
            out.typed[start:end] = [False] * (end - start)
        start = end + 1
    for match in _MARKUP.finditer(out.text):
        if out.typed[match.start()]:
            out.typed[match.start() : match.end()] = [False] * (match.end() - match.start())


def plain_prose(file: str, text: str, first_line: int) -> Prose:
    """Text without macros (front matter, a lab's file) as a Prose, every character typed."""
    out = Prose(file, text, [], [True] * len(text))
    for number, line in enumerate(text.split("\n"), start=first_line):
        out.lines += [number] * (len(line) + 1)
    del out.lines[len(text) :]
    return out
