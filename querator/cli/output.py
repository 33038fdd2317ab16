"""How commands print: JSON lists, aligned tables, instants."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typer
from pydantic import BaseModel

from querator.errors import InvalidArgument


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


def _json_list(models: Sequence[BaseModel], exclude: set[str] | None = None) -> None:
    """Print ``models`` as one JSON array."""
    typer.echo(json.dumps([m.model_dump(mode="json", exclude=exclude) for m in models], indent=1))


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def json_argument(text: str, field: str = "value") -> object:
    """The JSON value a command's argument ``text`` holds (NaN and infinities
    refused: InvalidArgument naming ``field``)."""

    def constant(name: str) -> object:
        raise InvalidArgument(field, f"must be JSON, which has no {name}")

    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(field, f"must be JSON: {exc}") from None
