"""``querator runs stream``: follow a run's stream until it ends."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from querator.cli.app import Url, _reporting, _store, runs_app
from querator.queue.options import DEFAULT_URL
from querator.workflows.streams import read_stream


@runs_app.command("stream")
def runs_stream(
    run_id: str,
    key: str,
    url: Url = DEFAULT_URL,
    offset: Annotated[int, typer.Option(help="Skip this many values (those read before).")] = 0,
) -> None:
    """Print each value of run RUN_ID's stream KEY as a JSON line, as it is
    written, until the stream is closed or the run ends."""
    with _reporting(), _store(url) as q:
        for value in read_stream(q, run_id, key, offset):
            typer.echo(json.dumps(value, separators=(",", ":")))
