"""The ``querator`` command: run workers, inspect runs and queues.

```
querator worker myapp.flows [--url URL] [--concurrency N]   # until SIGTERM/SIGINT
querator worker myapp.flows:FUNCTIONS                       # only the functions listed there
querator worker path/to/flows.py
querator start shop.checkout --app myapp.flows --args '["o-1"]' [--key o-1] [--wait]
querator runs list [--status failed] [--workflow shop.checkout] [--since 2h] [--limit 50]
querator runs list --after RUN_ID            # the next page (newest first)
querator runs reindex                        # index runs started before the run index existed
querator runs show RUN_ID
querator runs cancel RUN_ID [--reason TEXT]
querator runs retry-compensation RUN_ID      # re-drive a compensation_failed saga
querator runs resume RUN_ID                  # a failed or cancelled run, from its failed step
querator runs fork RUN_ID --from-step N      # a new run keeping steps 0 … N-1
querator runs replay RUN_ID... --app myapp.flows   # check new code against stored runs
querator runs replay --running --app myapp.flows   # ... against every running run
querator queues list
querator queues stats NAME
querator queues delete NAME [--force]
querator locks list [--json]                 # semaphores and locks: limit, free, holders
querator dead list QUEUE [--limit N]         # dead letters of QUEUE (its dead_queue), with a count
querator dead show QUEUE ITEM_ID
querator dead requeue QUEUE [ITEM_ID...] [--all]   # back into QUEUE
querator dead purge QUEUE [ITEM_ID...] [--all]
querator schedules list | show NAME | pause NAME | resume NAME | trigger NAME | delete NAME
querator schedules create NAME WORKFLOW --app myapp.flows --cron '0 * * * *' [--args JSON]
querator scheduler [myapp.flows] [--interval 5]   # fire every schedule of the store, alone
querator health [--max-age SECONDS] [--require-sync-replication]  # probes: exit 1 when unhealthy
querator migrate [--dry-run]                 # bring the store's schema to this version
querator namespaces list | create NAME | delete NAME --force | move NAME --to-node H:P
querator webhooks list | show | add | disable | enable | rotate-secret | delete | send
querator webhooks attempts | failed | redrive | worker    # see docs/webhooks.md
querator serve [--host 127.0.0.1] [--port 2319] [--app myapp.flows]   # the HTTP API
querator tokens create | list | revoke       # bearer tokens of the HTTP API
```

The store is ``--url``, else ``$QUERATOR_URL``, else ``sqlite:///querator.db``;
its namespace ``--namespace``, else ``$QUERATOR_NAMESPACE``, else the URL's
``?namespace=``, else ``default``.
Errors of the ``querator.errors`` hierarchy are printed on stderr and end the
command with exit status 1 (2 for a bad argument).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from querator.cli.help_format import NAMESPACE_META, CliGroup
from querator.errors import InvalidArgument, QueratorError
from querator.queue.backends.namespaces import namespaced_url, with_namespace
from querator.queue.client import QueueClient
from querator.workflows.errors import RunNotFound
from querator.workflows.functions import DurableFunction, StepFunction, WorkflowFunction

__all__ = ["app", "load_functions", "main"]

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


def _import(module: str) -> ModuleType:
    if module.endswith(".py") or os.sep in module:
        path = Path(module).resolve()
        if not path.is_file():
            raise InvalidArgument("module", f"no file {module!r}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise InvalidArgument("module", f"cannot import {module!r}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = loaded
        spec.loader.exec_module(loaded)
        return loaded
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current directory
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise InvalidArgument("module", f"cannot import {module!r}: {exc}") from exc


def load_functions(target: str) -> list[DurableFunction]:
    """The ``@step``/``@workflow`` functions named by ``MODULE[:ATTR]``.

    ``MODULE`` is a dotted module name (found from the current directory too)
    or a ``.py`` file path. Without ``ATTR``: every step and workflow defined
    in or imported into the module. With ``ATTR`` (dotted): that function, or
    the functions of that list/tuple.
    """
    module_name, _, attr = target.partition(":")
    module = _import(module_name)
    if not attr:
        found: Any = list(vars(module).values())
    else:
        found = module
        for part in attr.split("."):
            if not hasattr(found, part):
                raise InvalidArgument("module", f"{module_name!r} has no attribute {attr!r}")
            found = getattr(found, part)
        if isinstance(found, StepFunction | WorkflowFunction):
            found = [found]
        elif not isinstance(found, list | tuple | set | frozenset):
            raise InvalidArgument("module", f"{attr!r} is neither a function nor a list of them")
    functions: dict[int, DurableFunction] = {}
    for obj in found:
        if isinstance(obj, StepFunction | WorkflowFunction):
            functions.setdefault(id(obj), obj)
        elif attr:
            raise InvalidArgument("module", f"{obj!r} in {attr!r} is not a @step or @workflow")
    if not functions:
        raise InvalidArgument("module", f"no @step or @workflow function in {target!r}")
    return list(functions.values())


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


def _json_list(models: Sequence[BaseModel], exclude: set[str] | None = None) -> None:
    """Print ``models`` as one JSON array."""
    typer.echo(json.dumps([m.model_dump(mode="json", exclude=exclude) for m in models], indent=1))


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> None:
    """Entry point of the ``querator`` script."""
    app()


# The commands register themselves on the apps above when imported.
from querator.cli import locks as locks  # noqa: E402
from querator.cli import migrate as migrate  # noqa: E402
from querator.cli import namespaces as namespaces  # noqa: E402
from querator.cli import queues as queues  # noqa: E402
from querator.cli import runs as runs  # noqa: E402
from querator.cli import scheduler as scheduler  # noqa: E402
from querator.cli import schedules as schedules  # noqa: E402
from querator.cli import serve as serve  # noqa: E402
from querator.cli import start as start  # noqa: E402
from querator.cli import webhooks as webhooks  # noqa: E402
from querator.cli import worker as worker  # noqa: E402
