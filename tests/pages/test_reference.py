"""The lab.yml reference and the JSON Schema are made from the schema's models, so they list every
key with its type, default, description and example, and cannot fall behind."""

from __future__ import annotations

import json
import subprocess
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import BaseModel
from support import COURSE, FIXTURES, REPO

from course.lab.editor_schema import SCHEMA_FILE, json_schema
from course.lab.keys import is_model, key_name, union_members, unwrap
from course.lab.schema import Lab
from course.pages.reference import EXAMPLE, default_text, reference_markdown


def reachable(model: type[BaseModel]) -> set[type[BaseModel]]:
    """Every model the schema reaches from `model`, through lists, mappings and unions."""
    found = {model}
    for info in model.model_fields.values():
        shape = unwrap(info.annotation)
        while typing.get_origin(shape) in (list, dict):
            shape = unwrap(typing.get_args(shape)[-1])
        nested = [m for _, m in union_members(shape)] or ([shape] if is_model(shape) else [])
        for inner in nested:
            if inner not in found:
                found |= reachable(inner)
    return found


def rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| `")]


def test_every_field_of_every_model_is_a_row_with_its_description_default_and_example() -> None:
    page = reference_markdown()
    table = rows(page)
    expected = 0
    seen: set[tuple[str, str]] = set()
    for model in reachable(Lab):
        for name, info in model.model_fields.items():
            key = key_name(name, info)
            description = " ".join((info.description or "").split())
            assert description, f"{model.__name__}.{name} has no docstring"
            assert info.examples, f"{model.__name__}.{name} has no example"
            example = yaml.safe_dump({key: info.examples[0]}, default_flow_style=True, width=999)
            assert yaml.safe_load(example) == {key: info.examples[0]}
            matching = [
                r
                for r in table
                if r.startswith(f"| `{key}` |") and description.replace("|", "\\|") in r
            ]
            assert len(matching) == 1, (model.__name__, key, matching)
            assert f"| {default_text(info)} |" in matching[0]
            assert f"`{key}: " in matching[0]  # the example
            if (key, description) not in seen:  # the keys every kind of step has: listed once
                seen.add((key, description))
                expected += 1
    assert len(table) == expected


def test_the_defaults_a_new_author_had_to_look_up_are_on_the_page() -> None:
    page = reference_markdown()
    assert "| `timeout` | number (above 0) | `600` |" in page
    assert "| `deadline` | number (above 0) | `60` |" in page
    assert "| `type` | one of `int`, `float`, `str` | `float` |" in page
    assert "| `python` | text | `python3` |" in page
    for anchor in ("top-level", "steps", "run-step", "start-step", "stop-step", "ready", "capture"):
        assert f"{{#{anchor}}}" in page


def test_the_example_at_the_top_is_a_valid_lab() -> None:
    lab = Lab.model_validate(yaml.safe_load(EXAMPLE))
    assert [s.id for s in lab.steps] == ["measure", "server", "stop-server"]


def test_the_reference_page_is_generated_and_built() -> None:
    text = (REPO / "docs/authors/lab-yml.md").read_text(encoding="utf-8")
    assert "{{ lab_reference() }}" in text


def test_the_committed_json_schema_is_current_and_checks_real_labs() -> None:
    committed = json.loads((REPO / "lab" / SCHEMA_FILE).read_text(encoding="utf-8"))
    assert committed == json_schema(), "run: course schema -o lab/lab.schema.json"
    labs = [*REPO.glob("lab/*/lab.yml"), *FIXTURES.glob("*/lab/*/lab.yml")]
    assert len(labs) >= 2
    for path in labs:
        jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), committed)
    bad = yaml.safe_load(EXAMPLE)
    bad["steps"][1]["ready"]["deadline"] = 10
    with pytest.raises(jsonschema.ValidationError, match="deadline"):
        jsonschema.validate(bad, committed)
    assert "deadline" in committed["$defs"]["StartStep"]["properties"]
    assert committed["$defs"]["RunStep"]["properties"]["timeout"]["default"] == 600


def test_course_schema_prints_the_schema(tmp_path: Path) -> None:
    done = subprocess.run([*COURSE, "schema"], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == json_schema()
    subprocess.run([*COURSE, "schema", "-o", str(tmp_path / "s.json")], check=True)
    assert json.loads((tmp_path / "s.json").read_text()) == json_schema()
