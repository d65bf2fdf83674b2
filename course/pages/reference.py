"""The lab.yml reference, made from the schema itself (`course.lab.schema`): every key, its type,
its default and the docstring written under it, so that the page cannot fall behind the code.
"""

from __future__ import annotations

import ast
import html
import inspect
import re
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ..lab import schema
from .context import PageContext
from .macros import macro

SECTIONS: tuple[tuple[type[BaseModel], str, str], ...] = (
    (schema.Lab, "lab-yml", "lab.yml"),
    (schema.RunStep, "run-step", "A step that runs a command (`run:`)"),
    (schema.StartStep, "start-step", "A step that starts a service (`start:`)"),
    (schema.StopStep, "stop-step", "A step that stops a service (`stop:`)"),
    (schema.Capture, "capture", "A captured value (`capture:`)"),
    (schema.Ready, "ready", "Readiness of a service (`ready:`)"),
    (schema.Setup, "setup", "`setup:`"),
    (schema.Resources, "resources", "`resources:`"),
)
ANCHORS = {model: anchor for model, anchor, _ in SECTIONS}
_CODE = re.compile(r"`([^`]+)`")


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the docstring under it, for a model and its bases (read from the source)."""
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        tree = ast.parse(inspect.getsource(klass))
        body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, [*body[1:], None], strict=True):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            if (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[node.target.id] = inspect.cleandoc(after.value.value)
    return found


def type_text(annotation: Any) -> str:
    """A field's type as the reference shows it (HTML), models linked to their section."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = args[0]
        if typing.get_origin(inner) in (typing.Union, types.UnionType) and all(
            typing.get_origin(a) is typing.Annotated for a in typing.get_args(inner)
        ):  # the discriminated union of step kinds
            kinds = [typing.get_args(a)[0] for a in typing.get_args(inner)]
            return " or ".join(type_text(k) for k in kinds)
        return type_text(inner)
    if origin is typing.Literal:
        return " or ".join(f"<code>{html.escape(str(a))}</code>" for a in args)
    if origin in (typing.Union, types.UnionType):
        shown = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(shown) + (" or none" if type(None) in args else "")
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        anchor = ANCHORS.get(annotation)
        name = html.escape(annotation.__name__)
        return f'<a href="#{anchor}">{name}</a>' if anchor else name
    return html.escape(getattr(annotation, "__name__", str(annotation)))


def default_text(info: Any) -> str:
    """A field's default as YAML would write it, or 'required'."""
    if info.default is PydanticUndefined and info.default_factory is None:
        return "<em>required</em>"
    value = info.default_factory() if info.default_factory is not None else info.default
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if value is None or isinstance(value, bool):
        value = {None: "none", True: "true", False: "false"}[value]
    return f"<code>{html.escape(str(value))}</code>"


def model_table(model: type[BaseModel]) -> str:
    """One model's keys as a table: key, type, default, what it is."""
    docs = field_docs(model)
    rows = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        cells = [
            f"<code>{html.escape(key)}</code>",
            type_text(info.annotation),
            default_text(info),
            _CODE.sub(r"<code>\1</code>", html.escape(docs.get(name, ""))),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("key", "type", "default", "what it is"))
    return (
        '<div class="md-typeset__scrollwrap" tabindex="0" role="region" '
        f'aria-label="Keys of {html.escape(model.__name__)}"><div class="md-typeset__table">'
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></div>"
    )


@macro
def lab_reference(ctx: PageContext) -> str:
    """Every key of lab.yml, from the schema: type, default and what it does."""
    parts = []
    for model, anchor, title in SECTIONS:
        doc = inspect.cleandoc(model.__doc__ or "")
        parts.append(f"## {title} {{ #{anchor} }}\n\n{doc}\n\n{model_table(model)}")
    return "\n\n".join(parts)
