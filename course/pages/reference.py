"""The lab.yml reference, generated from the schema's models at build time so it cannot drift.

    {{ lab_reference() }}     on a page for authors (docs/lab-reference.md)

Every mapping of lab.yml gets a section, in the order a reader meets it, and every key a row: its
type, its default, what it does (the field's docstring in `course/lab/schema.py`) and a short
example (the field's `examples`). Keys shared by every kind of step are listed once.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..lab.keys import is_model, key_name, union_members, unwrap
from ..lab.schema import Lab
from .context import PageContext
from .macros import macro

EXAMPLE = """\
# yaml-language-server: $schema=../lab.schema.json
lesson: demo
title: A first lab
setup: {install_seconds: 30}
steps:
  - id: measure
    title: Time 200 small requests
    run: python3 measure.py
    timeout: 60
    inputs: [measure.py]
    files: [results/latency.json]
    capture:
      mean: {regex: 'mean latency: ([\\d.]+) ms', unit: ms}
      p50: {json: results/latency.json, key: p50_ms, unit: ms}
  - id: server
    start: python3 server.py
    ready: {log: 'listening on http://127\\.0\\.0\\.1:\\d+'}
    deadline: 20
  - id: stop-server
    stop: server
"""
"""A complete lab.yml, shown at the top of the reference (a test validates it)."""


@dataclass
class Section:
    """One mapping of lab.yml: its heading, anchor, what it is, and the keys it lists."""

    title: str
    anchor: str
    about: str
    rows: list[tuple[str, FieldInfo]] = field(default_factory=list)
    """(key as lab.yml spells it, its field); a kind of step lists only its own keys."""


Anchors = dict[Any, str]
"""A nested model, or the tuple of a union's models, -> the anchor of its section."""


def sections(root: type[BaseModel] = Lab) -> tuple[list[Section], Anchors]:
    """Every mapping reachable from the top level, in the order a reader meets it."""
    found: list[Section] = []
    anchors: Anchors = {}

    def add(title: str, anchor: str, about: str, model: type[BaseModel], names: list[str]) -> None:
        rows = [(key_name(n, model.model_fields[n]), model.model_fields[n]) for n in names]
        found.append(Section(title, anchor, about, rows))
        for name in names:
            shape = _inner(model.model_fields[name].annotation)
            members = union_members(shape)
            if members:
                models = tuple(m for _, m in members)
                anchors[models] = name
                shared = [
                    n for n in models[0].model_fields if all(n in m.model_fields for m in models)
                ]
                kinds = ", ".join(f"`{tag}`" for tag, _ in members)
                about_union = (
                    f"Each of the `{name}` is one of {len(members)} kinds, named by the one key it "
                    f"has of {kinds}. These keys go with every kind:"
                )
                add(f"`{name}`: every kind", name, about_union, models[0], shared)
                for tag, member in members:
                    own = [n for n in member.model_fields if n not in shared]
                    add(f"A `{tag}` step", f"{tag}-step", _about(member), member, own)
            elif is_model(shape) and shape not in anchors:
                anchors[shape] = name
                add(f"`{name}`", name, _about(shape), shape, list(shape.model_fields))

    anchors[root] = "top-level"
    add("The top level", "top-level", _about(root), root, list(root.model_fields))
    return found, anchors


def _inner(annotation: Any) -> Any:
    """What a field holds once lists and mappings are looked through."""
    shape = unwrap(annotation)
    while typing.get_origin(shape) in (list, dict):
        shape = unwrap(typing.get_args(shape)[-1])
    return shape


def _about(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def type_text(annotation: Any, anchors: Anchors) -> str:
    """A field's type in words, with a link to the section of a nested mapping."""
    shape = unwrap(annotation)
    members = union_members(shape)
    origin = typing.get_origin(shape)
    if members:
        return f"[step](#{anchors[tuple(m for _, m in members)]})"
    if is_model(shape):
        return f"[mapping](#{anchors[shape]})"
    if origin is list:
        return f"list of {type_text(typing.get_args(shape)[0], anchors)}"
    if origin is dict:
        return f"mapping of names to {type_text(typing.get_args(shape)[1], anchors)}"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{v}`" for v in typing.get_args(shape))
    words = {str: "text", float: "number", int: "whole number", bool: "true or false"}
    return words.get(shape, str(shape))


def limits(info: FieldInfo) -> str:
    """A field's numeric limits in words: ' (above 0)', ' (at least 1)'."""
    words = []
    for item in info.metadata:
        if isinstance(item, annotated_types.Gt):
            words.append(f"above {item.gt}")
        elif isinstance(item, annotated_types.Ge):
            words.append(f"at least {item.ge}")
        elif isinstance(item, annotated_types.MinLen):
            words.append(f"at least {item.min_length}")
    return f" ({', '.join(words)})" if words else ""


def default_text(info: FieldInfo) -> str:
    """A field's default as lab.yml would spell it, or 'required'."""
    default = info.default
    if info.is_required() or default is PydanticUndefined:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, BaseModel):
        return "each key's default"
    if isinstance(default, float) and default.is_integer():
        return f"`{default:g}`"
    return f"`{_flow(default)}`"


def example_text(key: str, info: FieldInfo) -> str:
    """The field's first example as one line of lab.yml."""
    if not info.examples:
        return ""
    return f"`{key}: {_flow(info.examples[0])}`"


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def reference_markdown() -> str:
    """The whole reference as Markdown: an example, then a table of keys per mapping."""
    found, anchors = sections()
    out = [
        "A complete `lab.yml`, small enough to read at once (`course new LESSON` writes one like "
        "it); every key is described below.",
        "",
        f"```yaml\n{EXAMPLE}```",
    ]
    for section in found:
        out += ["", f"## {section.title} {{#{section.anchor}}}", "", section.about, ""]
        out += [
            "| key | type | default | what it does |",
            "| --- | --- | --- | --- |",
        ]
        for key, info in section.rows:
            kind = type_text(info.annotation, anchors) + limits(info)
            example = example_text(key, info)
            what = (info.description or "") + (f"<br>Example: {example}" if example else "")
            out.append(f"| `{key}` | {_cell(kind)} | {_cell(default_text(info))} | {_cell(what)} |")
    return "\n".join(out) + "\n"


@macro
def lab_reference(ctx: PageContext) -> str:
    """Every key of lab.yml, generated from the schema: type, default, what it does, an example."""
    return reference_markdown()
