"""`course schema`: print or write lab.yml's JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write it to this file (such as lab/lab.schema.json) instead of printing it.",
)
def schema(output: Path | None) -> None:
    """Print lab.yml's JSON Schema, for editors (yaml-language-server) and other tools."""
    from .editor_schema import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
