"""``querator events``: emit an event by name (runs in ``wait_for_event`` wake)."""

from __future__ import annotations

from typing import Annotated

import typer

from querator.cli.app import Url, _reporting, _store, events_app
from querator.cli.output import json_argument
from querator.queue.options import DEFAULT_URL
from querator.workflows.events import emit_event


@events_app.command("emit")
def events_emit(
    name: Annotated[str, typer.Argument(help="The event's name (order:42.paid).")],
    payload: Annotated[
        str, typer.Argument(help="The payload, as JSON (quote a string: '\"paid\"').")
    ],
    url: Url = DEFAULT_URL,
) -> None:
    """Emit event NAME: every run waiting in wait_for_event(NAME) wakes, and runs
    that wait for it later see it (the first emit of a name wins)."""
    with _reporting():
        value = json_argument(payload, "payload")
        with _store(url) as q:
            first = emit_event(q, name, value)
    if first:
        typer.echo(f"{name}: emitted")
    else:
        typer.echo(f"{name}: already emitted (its first payload stands); waiting runs woken")
