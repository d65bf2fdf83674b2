"""The keys of lab.yml, read from the schema's models: which mapping sits at a place in the file,
which keys it takes, and where a misplaced key belongs.

Nothing here is a hand-kept list: a field added to `schema.py` is known to the error messages
(`load.py`) and to the lab.yml reference page (`pages/reference.py`) at once.

    mapping_at(("steps", 0, "run", "ready"))  -> Mapping(Ready, "ready", ...)
    keys(Ready)                               -> ["url", "log"]
    unknown_key(("steps", 0, "ready", "deadline"))
        -> "unknown key 'deadline' (...); ready takes: ..."
    line_of(yaml.compose(text), ("steps", 0, "ready"))  -> 11

The same walk serves other YAML read into models (a page's front matter: `pages/lessons.py`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, Tag
from pydantic.fields import FieldInfo

from .schema import Lab, suggest

Loc = Sequence[str | int]


@dataclass(frozen=True)
class Mapping:
    """A mapping of lab.yml: the model it is read into, what messages call it, its ancestors."""

    model: type[BaseModel]
    label: str
    """'the top level', 'a run step', 'ready', "capture 'p50'", 'setup' ..."""
    parents: tuple[Mapping, ...] = ()
    """The mappings around it, innermost first."""
    kinds: tuple[tuple[str, type[BaseModel]], ...] = ()
    """For a step: every kind of step there is (tag, model), to say where a key belongs."""


def keys(model: type[BaseModel]) -> list[str]:
    """The keys a mapping read into `model` takes, as lab.yml spells them, in declared order."""
    return [key_name(name, info) for name, info in model.model_fields.items()]


def key_name(name: str, info: FieldInfo) -> str:
    """A field as lab.yml spells it (its alias, such as a capture's `json`)."""
    return info.alias or name


def field_of(model: type[BaseModel], key: str) -> FieldInfo | None:
    """The field behind a key of lab.yml, by alias or name."""
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def unwrap(annotation: Any) -> Any:
    """An annotation without `Annotated[...]` and without `| None`."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return unwrap(members[0])
    return annotation


def union_members(annotation: Any) -> list[tuple[str | None, type[BaseModel]]]:
    """The models of a union of several models, each with its tag (`run`, `start`, `stop` for
    steps)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return []
    found: list[tuple[str | None, type[BaseModel]]] = []
    for member in typing.get_args(annotation):
        tag = None
        if typing.get_origin(member) is typing.Annotated:
            member, *extras = typing.get_args(member)
            tag = next((e.tag for e in extras if isinstance(e, Tag)), None)
        if isinstance(member, type) and issubclass(member, BaseModel):
            found.append((tag, member))
    return found if len(found) > 1 else []  # `X | None` is no choice


def is_model(annotation: Any) -> bool:
    """Whether an (unwrapped) annotation is a model, a mapping of lab.yml."""
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def mapping_at(loc: Loc, root: type[BaseModel] = Lab) -> Mapping | None:
    """The mapping of lab.yml at a location as pydantic reports it (a step's kind tag included);
    None when the location does not lead to a mapping of the schema."""
    here = Mapping(root, "the top level")
    shape: Any = None  # what the location holds below the last mapping, still to walk into
    label = ""
    choices: list[tuple[str | None, type[BaseModel]]] = []  # a union waiting for its tag
    for part in loc:
        if choices:
            chosen = [model for tag, model in choices if tag == part]
            if not chosen:
                return None
            kinds = tuple((tag, model) for tag, model in choices if tag is not None)
            here = Mapping(chosen[0], f"a {part} step", (here, *here.parents), kinds)
            shape, choices = None, []
            continue
        if shape is None:
            info = field_of(here.model, str(part))
            if info is None:
                return None
            shape, label = info.annotation, str(part)
        else:
            shape = unwrap(shape)
            origin = typing.get_origin(shape)
            if origin is list and isinstance(part, int):
                shape, label = typing.get_args(shape)[0], f"{label} #{part + 1}"
            elif origin is dict:
                shape, label = typing.get_args(shape)[1], f"{label} '{part}'"
            else:
                return None
        choices = union_members(shape)
        if not choices and is_model(unwrap(shape)):
            here = Mapping(unwrap(shape), label, (here, *here.parents))
            shape = None
    return here if shape is None and not choices else None


def belongs(key: str, mapping: Mapping) -> str:
    """Where a key that is unknown in `mapping` does belong, as a clause; '' when nowhere near."""
    for parent in mapping.parents:
        if field_of(parent.model, key) is not None:
            return f"'{key}' is a key of {parent.label}, one level up"
    for tag, model in mapping.kinds:
        if model is not mapping.model and field_of(model, key) is not None:
            return f"'{key}' is a key of a {tag} step"
    for parent in mapping.parents:
        for tag, model in parent.kinds:
            if model is not parent.model and field_of(model, key) is not None:
                return f"'{key}' is a key of a {tag} step"
    return ""


def unknown_key(loc: Sequence[Any], root: type[BaseModel] = Lab) -> str:
    """An unknown key at any depth: the close match, where it belongs, the keys allowed there."""
    key = str(loc[-1])
    mapping = mapping_at(loc[:-1], root)
    if mapping is None:  # not reached by the schema's walk: say what pydantic knows
        return f"unknown key '{key}'"
    allowed = keys(mapping.model)
    elsewhere = belongs(key, mapping)
    hint = suggest(key, allowed) or (f" ({elsewhere})" if elsewhere else "")
    return f"unknown key '{key}'{hint}; {mapping.label} takes: {', '.join(allowed)}"


def line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int | None:
    """The line (from 1) of the YAML node at a location, as far down as it exists; None without
    a node."""
    found = node
    for part in loc:
        nxt = None
        if isinstance(found, yaml.MappingNode):
            for k, v in found.value:
                if k.value == str(part):
                    nxt = k if part == loc[-1] and isinstance(v, yaml.ScalarNode) is False else v
                    break
        elif (
            isinstance(found, yaml.SequenceNode)
            and isinstance(part, int)
            and part < len(found.value)
        ):
            nxt = found.value[part]
        if nxt is None:
            break
        found = nxt
    return None if found is None else int(found.start_mark.line) + 1


def problem_text(error: Any) -> str:
    """A pydantic error other than an unknown key, as a sentence: 'required but missing', or its
    message with the value it got when that is a plain one."""
    if error["type"] == "missing":
        return "required but missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    if not isinstance(error["input"], (dict, list)):
        message += f" (got {error['input']!r})"
    return message
