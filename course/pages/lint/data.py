"""The strings of a page's data file a learner reads (checks' questions, options and explanations,
notes, questions people ask, the glossary), each with its lines in the file."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from ...record import yamlfast
from .findings import Finding


@dataclass(frozen=True)
class DataString:
    """One string of the data file a learner reads."""

    label: str
    """Where it sits, as messages say it: "check 'grows', option #2 why"."""
    text: str
    first: int
    """Its first line in the file (1-based)."""
    last: int


def data_strings(path: Path) -> list[DataString]:
    """The readable strings of a data file, in file order; none when it cannot be read (its
    problems are the page's, reported by the build already)."""
    try:
        root = yamlfast.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    found: list[DataString] = []
    for key, node in root.value:
        if key.value == "checks" and isinstance(node, yaml.MappingNode):
            for check_key, check in node.value:
                found += _check(f"check '{check_key.value}'", check)
        elif key.value == "faq" and isinstance(node, yaml.SequenceNode):
            for number, entry in enumerate(node.value, start=1):
                found += _fields(f"faq #{number}", entry, ("q", "a"))
        elif key.value == "glossary" and isinstance(node, yaml.MappingNode):
            for term, text in node.value:
                found += _scalar(f"glossary '{term.value}'", text)
    return found


def _check(label: str, check: yaml.Node) -> list[DataString]:
    found = _fields(label, check, ("question", "note"))
    if isinstance(check, yaml.MappingNode):
        for key, node in check.value:
            if key.value == "options" and isinstance(node, yaml.SequenceNode):
                for number, option in enumerate(node.value, start=1):
                    found += _fields(f"{label}, option #{number}", option, ("text", "why"))
        found += _measured(label, check)
    return found


def _measured(label: str, check: yaml.MappingNode) -> list[DataString]:
    """A predict check's measured value as the reveal prints it: the value macro, then the
    suffix (where '811,008 tok tokens' is made)."""
    fields = {key.value: node for key, node in check.value if isinstance(node, yaml.ScalarNode)}
    if "measured" not in fields:
        return []
    unit = fields["unit"].value if "unit" in fields else None
    decimals = fields["decimals"].value if "decimals" in fields else ""
    percent = "percent" in fields and fields["percent"].value.lower() in ("true", "yes", "on")
    suffix = fields["suffix"].value if "suffix" in fields else ""
    args = [repr(fields["measured"].value), f"unit={unit!r}", f"percent={percent}"]
    if decimals.isdigit():
        args.append(f"decimals={decimals}")
    at = fields.get("suffix", fields["measured"])
    literal = "{% raw %}" + suffix + "{% endraw %}" if suffix else ""
    text = f"{{{{ value({', '.join(args)}) }}}}{literal}"
    return [DataString(f"{label} measured", text, at.start_mark.line + 1, at.end_mark.line + 1)]


def _fields(label: str, node: yaml.Node, names: tuple[str, ...]) -> list[DataString]:
    if not isinstance(node, yaml.MappingNode):
        return []
    found: list[DataString] = []
    for key, value in node.value:
        if key.value in names:
            found += _scalar(f"{label} {key.value}", value)
    return found


def _scalar(label: str, node: yaml.Node) -> list[DataString]:
    if not isinstance(node, yaml.ScalarNode) or not isinstance(node.value, str):
        return []
    first = node.start_mark.line + 1
    last = max(first, node.end_mark.line + (0 if node.end_mark.column == 0 else 1))
    return [DataString(label, node.value, first, last)]


def placed(finding: Finding, lines: list[str], string: DataString) -> Finding:
    """A finding moved to the line of the string that holds what it found (a folded string's
    lines are not the text's)."""
    needles = [finding.needle, *finding.needle.split()[:1]] if finding.needle else []
    for needle in needles:
        for number in range(string.first, min(string.last, len(lines)) + 1):
            if needle in lines[number - 1]:
                return replace(finding, line=number)
    return replace(finding, line=string.first)
