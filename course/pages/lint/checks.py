"""The checks of a page's text (a `Prose`): typed copies of known quantities, a unit printed
twice, one value twice in a sentence, a "how many fit" count without its engine rule, words about
the tooling. Each returns its findings; the severity is the settings' business.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..format import recorded
from .findings import Finding, quoted
from .marked import Prose, Span
from .numbers import (
    PLAIN,
    PRODUCT_NAME,
    TWICE,
    UNITS,
    Known,
    chosen_length,
    copies_of,
    macro_for,
    significant_digits,
)
from .numbers import typed_numbers as find_typed
from .settings import Fit

_PARAGRAPH_END = r"\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#|\||!!!|\?\?\?|>))"
_SENTENCE_END = re.compile(rf"[.!?](?=[)\"”*_]*\s)|{_PARAGRAPH_END}")
_PARAGRAPH = re.compile(_PARAGRAPH_END)
_OPERATORS = set("×÷+−=*/")


def typed_copies(prose: Prose, known: list[Known], where: str = "") -> list[Finding]:
    """A number with a unit the author typed that equals a known quantity at the precision shown:
    a copy, to be inserted by its macro. Numbers with one significant digit ('2 MiB', '90 %') are
    too coarse to be copies; one marked `{# typed: ok #}` is typed on purpose."""
    found = []
    for typed in find_typed(prose.text):
        if not prose.all_typed(typed.start, typed.end) or typed.end in prose.ok:
            continue
        if significant_digits(typed.number) < 2 or chosen_length(typed):
            continue
        if _checked_by_claim(prose, typed.start, typed.number):
            continue
        same = copies_of(typed, known)
        if not same:
            continue
        named = ", ".join(f"{k.what} {k.name} ({_shown(k)})" for k in same[:3])
        more = f" and {len(same) - 3} more" if len(same) > 3 else ""
        found.append(
            Finding(
                prose.file,
                prose.line_at(typed.start),
                "typed-copy",
                f"{where}{quoted(typed.text)} is typed by hand and equals the {named}{more}: "
                f"insert it with {macro_for(same[0], typed)}",
                typed.text,
            )
        )
    return found


def _checked_by_claim(prose: Prose, position: int, number: str) -> bool:
    """Whether the number sits in a claim whose condition holds it as a literal (the build checks
    it against the record: `claim("... == 448", "exactly 448 MiB")`)."""
    condition = prose.claim_at(position)
    literal = re.escape(number.replace(",", ""))
    return (
        condition is not None
        and re.search(rf"(?<![\w.]){literal}(?![\w]|\.\d)", condition) is not None
    )


def _shown(known: Known) -> str:
    return recorded(known.value, known.unit)


def units_twice(prose: Prose, where: str = "") -> list[Finding]:
    """A number whose unit is followed by the same unit or its word: '72 % %', '811,008 tok
    tokens' (a value macro's unit and a typed one, as the reader sees them)."""
    found = []
    for match in TWICE.finditer(prose.text):
        first, again = UNITS[match.group("unit")], UNITS[match.group("again")]
        if first.family != again.family or not _readable(prose, match.start(), match.end()):
            continue
        span = prose.span_at(match.start())
        said = (
            f" ({span.macro}() already prints {match.group('unit')!r}: remove the typed "
            f"{match.group('again')!r}, or give the macro show_unit=False)"
            if span is not None and span.shown is not None
            else ""
        )
        found.append(
            Finding(
                prose.file,
                prose.line_at(match.start()),
                "unit-twice",
                f"{where}{quoted(match.group(0))} prints its unit twice{said}",
                match.group(0),
            )
        )
    return found


def _readable(prose: Prose, start: int, end: int) -> bool:
    """Whether text[start:end] is prose or printed numbers (not code, a terminal or a listing)."""
    for position in range(start, end):
        if prose.typed[position]:
            continue
        span = prose.span_at(position)
        if span is None or span.shown is None:
            return False
    return True


def sentences(prose: Prose, ends: re.Pattern[str] = _SENTENCE_END) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of readable text: macro outputs other than values and
    list items, headings and blank lines end a sentence too."""
    bounds = [0]
    for match in ends.finditer(prose.text):
        bounds.append(match.end())
    for span in prose.spans:
        if span.shown is None:
            bounds += [span.start, span.end]
    bounds.append(len(prose.text))
    bounds = sorted(set(bounds))
    for start, end in zip(bounds, bounds[1:], strict=False):
        if prose.text[start:end].strip():
            yield start, end


def _numbers(prose: Prose, start: int, end: int) -> Iterator[tuple[int, str, bool]]:
    """(position, number, printed by a value macro) of each number of a sentence."""
    for span in prose.spans_in(start, end):
        if span.shown is not None:
            match = PLAIN.search(prose.text, span.start, span.end)
            if match:
                yield span.start, match.group(0), True
    for match in PLAIN.finditer(prose.text, start, end):
        named = PRODUCT_NAME.match(prose.text, match.start())
        before = prose.text[: match.start()].rstrip()[-1:]
        after = prose.text[match.end() :].lstrip()[:1]
        in_formula = bool({before, after} & _OPERATORS)  # 18 × 128: arithmetic, not a statement
        if prose.all_typed(match.start(), match.end()) and not named and not in_formula:
            yield match.start(), match.group(0), False


def same_values(prose: Prose, where: str = "") -> list[Finding]:
    """A sentence that shows one value twice ('776.0 at 1,024, and the best, 776.0 TFLOP/s'): a
    number a value macro printed appears again in the sentence (numbers of one significant digit
    left out)."""
    found = []
    for start, end in sentences(prose):
        seen: dict[str, list[tuple[int, bool]]] = {}
        for position, number, printed in sorted(_numbers(prose, start, end)):
            if significant_digits(number) >= 2:
                seen.setdefault(number, []).append((position, printed))
        twice = [n for n, where_ in seen.items() if len(where_) > 1 and any(p for _, p in where_)]
        if twice:
            first = min(seen[n][0][0] for n in twice)
            names = " and ".join(twice)
            found.append(
                Finding(
                    prose.file,
                    prose.line_at(first),
                    "same-value",
                    f"{where}one sentence shows {names} twice: "
                    f"{quoted(prose.text[start:end].strip(), 140)}",
                    twice[0],
                )
            )
    return found


def fit_counts(prose: Prose, fit: Fit, where: str = "") -> list[Finding]:
    """A count of what fits on a card ('holds 24 conversations') in a paragraph that names no
    engine rule (vLLM's share of the whole card, transformers' share of the memory free after the
    weights, llama.cpp's given context)."""
    counts = "|".join(re.escape(c) for c in fit.counts)
    # up to two words between the number and the noun ('17 full-length conversations')
    between = r"(?:(?!(?:at|that|of|in|and|or|with|to)\b)[a-zA-Z][\w-]*\s+){0,2}"
    count = re.compile(rf"\s+{between}(?:{counts})\b", re.IGNORECASE)
    verbs, rules = _any(fit.verbs), _any(fit.rules)
    found = []
    unruled = [
        (a, b) for a, b in sentences(prose, _PARAGRAPH) if not rules.search(prose.text, a, b)
    ]
    for start, end in sentences(prose):
        sentence = prose.text[start:end]
        if any(a <= start < b for a, b in unruled) and verbs.search(sentence):
            found += _fit_count(prose, start, end, count, where)
    return found


def _fit_count(
    prose: Prose, start: int, end: int, count: re.Pattern[str], where: str
) -> list[Finding]:
    """The first count of what fits in a sentence, as a finding."""
    for position, number, number_end in _counts(prose, start, end):
        tail = count.match(prose.text, number_end)
        if tail and "." not in number:
            return [
                Finding(
                    prose.file,
                    prose.line_at(position),
                    "fit-rule",
                    f"{where}{quoted(number + tail.group(0))} counts what fits without naming "
                    f"the engine rule it assumes: {quoted(prose.text[start:end].strip(), 140)} "
                    "(name it in the paragraph: vLLM's share of the whole card, transformers' "
                    "share of the memory free after the weights, llama.cpp's given context)",
                    number,
                )
            ]
    return []


def _counts(prose: Prose, start: int, end: int) -> Iterator[tuple[int, str, int]]:
    """(position, number, its end) of each number of a sentence, printed or typed."""
    for span in prose.spans_in(start, end):
        if span.shown is not None:
            match = PLAIN.fullmatch(span.shown.text.strip())
            if match:
                yield span.start, match.group(0), span.end
    for match in PLAIN.finditer(prose.text, start, end):
        if prose.all_typed(match.start(), match.end()):
            yield match.start(), match.group(0), match.end()


def _any(words: list[str]) -> re.Pattern[str]:
    if not words:
        return re.compile(r"(?!)")
    return re.compile("|".join(rf"(?<!\w){re.escape(w)}(?!\w)" for w in words), re.IGNORECASE)


def tooling_phrases(
    prose: Prose,
    phrases: re.Pattern[str] | None,
    skip: Callable[[Span | None, str], bool] = lambda span, phrase: False,
    where: str = "",
) -> list[Finding]:
    """Words about the tooling, anywhere a reader reads (a listing of a lab file is checked as
    that file); `skip(span, phrase)` leaves out what another finding reports already. A phrase a
    macro prints on every call is reported once, at its first line."""
    if phrases is None or not phrases.search(prose.text):
        return []
    found: dict[tuple[str, str], Finding] = {}
    also: dict[tuple[str, str], list[int]] = {}
    for match in phrases.finditer(prose.text):
        span = prose.span_at(match.start())
        if (span is not None and span.macro == "listing") or skip(span, match.group(0)):
            continue
        line = prose.line_at(match.start())
        printed = span is not None and span.shown is None
        key = (match.group(0).lower(), span.macro if printed and span else f"line {line}")
        if key in found:
            also[key].append(line)
            continue
        by = f" (printed by {span.macro}())" if printed and span else ""
        found[key] = Finding(
            prose.file,
            line,
            "tooling-phrase",
            f"{where}{quoted(match.group(0))} is about the course's tooling, not the subject"
            f"{by}: {quoted(_around(prose.text, match.start(), match.end()))}",
            match.group(0),
        )
        also[key] = []
    return [_also(finding, also[key]) for key, finding in found.items()]


def _also(finding: Finding, lines: list[int]) -> Finding:
    others = sorted(set(lines) - {finding.line})
    if not others:
        return finding
    listed = ", ".join(str(n) for n in others)
    return replace(
        finding,
        message=f"{finding.message} (again at line{'s' if len(others) > 1 else ''} {listed})",
    )


def _around(text: str, start: int, end: int) -> str:
    """The line around a match, or 40 characters each side when the line is long."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if len(line) <= 100:
        return line
    return text[max(line_start, start - 40) : end + 40]
