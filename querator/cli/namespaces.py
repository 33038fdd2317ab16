"""``querator namespaces``: the namespaces of a store (docs/scale-out.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from querator.cli.app import AsJson, Url, _reporting, app
from querator.cli.help_format import CliGroup
from querator.errors import InvalidArgument
from querator.queue.backends.namespace_admin import (
    MOVE_MODES,
    delete_namespace,
    list_namespaces,
    move_namespace,
)
from querator.queue.backends.namespaces import check_namespace
from querator.queue.client import QueueClient
from querator.queue.options import DEFAULT_URL

namespaces_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Namespaces of a store.")
app.add_typer(namespaces_app, name="namespaces")

ToNode = Annotated[str, typer.Option("--to-node", help="The Citus worker node, host:port.")]
Mode = Annotated[
    str, typer.Option("--mode", help=f"Citus's transfer mode: {', '.join(MOVE_MODES)}.")
]
Force = Annotated[bool, typer.Option("--force", help="Yes, drop everything in it.")]


@namespaces_app.command("list")
def namespaces_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """The store's namespaces, one a line (``default`` is the store the URL names)."""
    with _reporting():
        found = list_namespaces(url)
    if as_json:
        typer.echo(json.dumps(found))
        return
    for name in found:
        typer.echo(name)


@namespaces_app.command("create")
def namespaces_create(namespace: str, url: Url = DEFAULT_URL) -> None:
    """Create a namespace (its schema, or its SQLite file); nothing when it exists."""
    with _reporting():
        QueueClient(url, namespace=check_namespace(namespace)).close()
    typer.echo(f"namespace {namespace} ready")


@namespaces_app.command("delete")
def namespaces_delete(namespace: str, url: Url = DEFAULT_URL, force: Force = False) -> None:
    """Drop a namespace with every queue, run, schedule and lock in it (needs ``--force``)."""
    if not force:
        typer.echo("error: deleting a namespace drops everything in it: add --force", err=True)
        raise typer.Exit(2)
    with _reporting():
        delete_namespace(url, namespace)
    typer.echo(f"namespace {namespace} deleted")


@namespaces_app.command("move")
def namespaces_move(
    namespace: str, to_node: ToNode, url: Url = DEFAULT_URL, mode: Mode = "auto"
) -> None:
    """Move a namespace to another worker node of the Citus cluster ``--url``
    names (its coordinator); querator keeps serving it meanwhile."""
    host, _, port = to_node.rpartition(":")
    with _reporting():
        if not host or not port.isdigit():
            raise InvalidArgument("to_node", f"{to_node!r} must be host:port")
        move_namespace(url, namespace, host, int(port), mode)
    typer.echo(f"namespace {namespace} moved to {to_node}")
