"""lab.yml's JSON Schema for editors (`course schema`, `lab/lab.schema.json`), made from the
schema's models with every field's description and example."""

from __future__ import annotations

from typing import Any

from .schema import Lab

SCHEMA_FILE = "lab.schema.json"
"""The JSON Schema's file under `lab/`, named by each lab.yml's first line for editors."""


def json_schema() -> dict[str, Any]:
    """lab.yml's JSON Schema, with every field's description and example (`course schema`)."""
    schema = _one_line(Lab.model_json_schema(by_alias=True))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "lab.yml: a lesson's lab",
    }


def _one_line(node: Any) -> Any:
    """The schema with each description on one line, as an editor's tooltip shows it."""
    if isinstance(node, dict):
        return {
            k: " ".join(v.split()) if k == "description" and isinstance(v, str) else _one_line(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_one_line(v) for v in node]
    return node
