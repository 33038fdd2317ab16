"""The ``querator`` typer app, its command groups, the options every command
shares (``--url``, ``--json``) and how errors end a command.

Command modules (:mod:`querator.cli.worker`, :mod:`querator.cli.runs` …)
register themselves on these apps; :mod:`querator.cli` imports them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

from querator.cli.help_format import NAMESPACE_META, CliGroup
from querator.errors import InvalidArgument, QueratorError
from querator.queue.backends.namespaces import namespaced_url, with_namespace
from querator.queue.client import QueueClient
from querator.workflows.errors import RunNotFound

app = typer.Typer(
    name="querator",
    cls=CliGroup,
    no_args_is_help=True,
    help="Workflows and sagas on a versioned lease queue.",
)
runs_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Inspect workflow runs.")
queues_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Inspect queues.")
app.add_typer(runs_app, name="runs")
app.add_typer(queues_app, name="queues")
dead_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Dead letters of a queue.")
schedules_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Cron schedules.")
app.add_typer(schedules_app, name="schedules")
app.add_typer(dead_app, name="dead")
events_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Events by name.")
app.add_typer(events_app, name="events")


def _namespaced(ctx: typer.Context, url: str) -> str:
    """The ``--url`` with the command's ``--namespace`` (when given) in it."""
    try:
        return with_namespace(url, ctx.meta.get(NAMESPACE_META))
    except InvalidArgument as exc:
        raise typer.BadParameter(str(exc)) from exc


Url = Annotated[
    str,
    typer.Option(
        "--url",
        envvar="QUERATOR_URL",
        help="Store URL (postgresql://, sqlite:///, …).",
        callback=_namespaced,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON (a list: one JSON array).")]


@contextmanager
def _reporting() -> Iterator[None]:
    """Turn querator errors into a message on stderr and an exit status."""
    try:
        yield
    except (InvalidArgument, RunNotFound) as exc:  # what the user named is wrong
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except QueratorError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _store(url: str) -> QueueClient:
    """The existing store at ``url``: a command other than ``worker`` never
    creates one (a mistyped SQLite path is an error, not a new empty store)."""
    _refuse_missing_file(url)
    return QueueClient(url)


def _refuse_missing_file(url: str) -> None:
    """Raise when ``url`` names a SQLite file that does not exist."""
    url = namespaced_url(url)
    if url.lower().startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if path and not Path(path).exists():
            raise QueratorError(f"no store at {url}")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"querator {metadata.version('querator')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Workflows and sagas on a versioned lease queue."""
