"""Adding a lesson to the outline, `docs/course.yml`, as an author would: one line, comments kept.

    add_lesson(docs, "gpu-memory", part=2, title="Sizing GPU memory")

The file is edited as text at the place YAML's own parser reports (the end of the part's lesson
list), so its comments, order and style stay as the author wrote them; the result is validated
before it replaces the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import yaml

from ..errors import PageError
from .outline import LESSON_ID, OUTLINE, Lesson, OutlineFile, load_outline


def add_lesson(
    docs: Path, lesson_id: str, part: int, title: str, part_title: str | None = None
) -> Lesson:
    """List a new lesson at the end of part `part` of docs/course.yml and return it, numbered.

    The part is found by its number; a part not in the outline yet is added at the end, with
    `part_title` when given (the file too, when there is none yet). PageError when the id is
    taken or is not a lesson id.
    """
    if not re.match(LESSON_ID, lesson_id):
        raise PageError(
            f"'{lesson_id}' is not a lesson id: lowercase letters, digits and '-', such as "
            "'gpu-memory'"
        )
    if not title.strip():
        raise PageError(f"lesson '{lesson_id}' needs a title")
    path = docs / OUTLINE
    outline = load_outline(docs)
    if any(lesson.id == lesson_id for lesson in outline.lessons):
        taken = outline.lesson(lesson_id)
        raise PageError(
            f"docs/{OUTLINE} already lists lesson '{lesson_id}' (lesson {taken.number})"
        )
    known = [p.number for p in outline.parts]
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    item = f"{{id: {lesson_id}, title: {_scalar(title)}}}"
    if part < 1:
        raise PageError(f"part {part}: parts are numbered from 1")
    if part in known:
        new = _append_lesson(text, known.index(part), item)
    else:
        named = f"\n    title: {_scalar(part_title)}" if part_title else ""
        new = _append_part(text, f"number: {part}{named}\n    lessons:\n      - {item}")
    try:
        checked = OutlineFile.model_validate(yaml.safe_load(new) or {})
    except (yaml.YAMLError, ValueError) as exc:  # a bug here, not the author's: say so plainly
        raise PageError(
            f"docs/{OUTLINE}: adding '{lesson_id}' would break the file: {exc}"
        ) from None
    if not any(lesson.id == lesson_id for p in checked.parts for lesson in p.lessons):
        raise PageError(f"docs/{OUTLINE}: could not add '{lesson_id}' to part {part}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)
    return load_outline(docs).lesson(lesson_id)


def _scalar(text: str) -> str:
    """A YAML scalar for a title: plain when it reads back unchanged, else double-quoted."""
    try:
        if yaml.safe_load(f"{{t: {text}}}") == {"t": text}:
            return text
    except yaml.YAMLError:
        pass
    return json.dumps(text, ensure_ascii=False)


def _mapping_value(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.Node):
            return v
    return None


def _root(text: str) -> yaml.Node | None:
    return yaml.compose(text) if text.strip() else None


def _append_lesson(text: str, index: int, item: str) -> str:
    parts = _mapping_value(_root(text), "parts")  # type: ignore[arg-type]
    assert isinstance(parts, yaml.SequenceNode)
    part = parts.value[index]
    lessons = _mapping_value(part, "lessons")
    if lessons is None:  # a part without lessons yet: add the key under its other keys
        key_column = part.start_mark.column
        return _insert_after(
            text, part, f"{' ' * key_column}lessons:\n{' ' * key_column}  - {item}"
        )
    return _append_item(text, lessons, item)


def _append_part(text: str, item: str) -> str:
    root = _root(text)
    parts = _mapping_value(root, "parts") if root is not None else None
    if parts is None:
        lead = text if not text or text.endswith("\n") else text + "\n"
        return f"{lead}parts:\n  - {item}\n"
    return _append_item(text, parts, item)


def _append_item(text: str, sequence: yaml.Node, item: str) -> str:
    """`item` added as the last entry of a sequence, in the sequence's own style."""
    assert isinstance(sequence, yaml.SequenceNode)
    if sequence.flow_style or not sequence.value:
        start, end = sequence.start_mark.index, sequence.end_mark.index
        existing = [text[n.start_mark.index : n.end_mark.index] for n in sequence.value]
        flat = item.replace("\n", " ")
        flat = re.sub(r"\s+", " ", flat)
        if "\n" in item:  # a whole part: write the list in block style under its key
            indent = " " * (sequence.start_mark.column)
            body = "\n".join(f"{indent}  - {e}" for e in [*existing, item])
            return text[:start] + "\n" + body + text[end:]
        return text[:start] + "[" + ", ".join([*existing, flat]) + "]" + text[end:]
    last = sequence.value[-1]
    line = text.splitlines()[last.start_mark.line]
    dash = line.rfind("-", 0, last.start_mark.column)
    indent = " " * max(dash, 0)
    shifted = item.replace("\n", "\n" + " " * max(dash - 2, 0))
    return _insert_after(text, last, f"{indent}- {shifted}")


def _insert_after(text: str, node: yaml.Node, new: str) -> str:
    """A line (or lines) inserted after the node's last line, before any trailing comments."""
    lines = text.splitlines(keepends=True)
    end = node.end_mark
    after = end.line + 1 if end.column > 0 else end.line
    while after > node.start_mark.line + 1 and not lines[after - 1].strip().split("#")[0]:
        after -= 1  # comments and blank lines after the node belong to what follows
    if after > 0 and not lines[after - 1].endswith("\n"):
        lines[after - 1] += "\n"
    lines.insert(after, new + "\n")
    return "".join(lines)
