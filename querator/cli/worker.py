"""``querator worker``: serve the workflows, steps and tasks of a module."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from querator.cli.app import Url, _reporting, app
from querator.cli.loading import load_served
from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.options import DEFAULT_URL
from querator.telemetry import logs
from querator.telemetry.logs import FORMATS, configure_logging
from querator.workflows.engine.live import DEFAULT_MAX_LIVE_RUNS
from querator.workflows.engine.worker import (
    DEFAULT_SHUTDOWN_GRACE,
    Worker,
    WorkerOptions,
    check_worker_options,
)

LogLevel = Annotated[str, typer.Option(help="Logging level.")]
LogFormat = Annotated[
    str, typer.Option(help="Log lines as key=value pairs (kv) or JSON objects (json).")
]


@app.command()
def worker(
    target: Annotated[
        str, typer.Argument(metavar="MODULE[:ATTR]", help="Where the functions are.")
    ],
    url: Url = DEFAULT_URL,
    concurrency: Annotated[int, typer.Option(help="Items handled at once.")] = 8,
    client_id: Annotated[str | None, typer.Option(help="Lease owner name.")] = None,
    shutdown_grace: Annotated[
        float, typer.Option(help="Seconds in-flight items may finish after SIGTERM.")
    ] = DEFAULT_SHUTDOWN_GRACE,
    max_live_runs: Annotated[
        int, typer.Option(help="Workflow bodies kept live between their steps.")
    ] = DEFAULT_MAX_LIVE_RUNS,
    wait_for_store: Annotated[
        bool,
        typer.Option(help="Wait for an unreachable store at start-up instead of failing."),
    ] = True,
    scheduler: Annotated[
        bool,
        typer.Option(
            help="Fire the cron schedules of the workflows served (off: leave them "
            "to other workers or `querator scheduler`)."
        ),
    ] = True,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "kv",
) -> None:
    """Serve the workflows of MODULE and the steps they call (and the steps and
    background tasks of MODULE) until SIGTERM or SIGINT; fire the cron
    schedules of those workflows (unless --no-scheduler)."""
    with _reporting():  # bad options: one line, before anything is imported or opened
        level, fmt = check_logging(log_level, log_format)
        options: WorkerOptions = {
            "concurrency": concurrency,
            "client_id": client_id,
            "shutdown_grace": shutdown_grace,
            "max_live_runs": max_live_runs,
            "scheduler": scheduler,
        }
        try:
            check_worker_options(options)
        except InvalidArgument as exc:  # named as the command line spells it
            raise InvalidArgument("--" + exc.field.replace("_", "-"), exc.rule) from None
    configure_logging(fmt, level, sys.stderr)
    with _reporting():
        functions = load_served(target)
        names = ", ".join(sorted(f.name for f in functions))
        logging.getLogger("querator.worker").info("registering %s", names)
        wait = WORKER_STORE_WAIT if wait_for_store else 0.0
        with QueueClient(url, wait_for_store=wait) as q:
            Worker(q, functions, **options).run()


def check_logging(log_level: str, log_format: str) -> tuple[int, logs.LogFormat]:
    """The level of ``--log-level`` and the format of ``--log-format`` (else
    InvalidArgument naming the option), for :func:`configure_logging`."""
    level = _log_level(log_level)
    if log_format not in FORMATS:
        raise InvalidArgument("--log-format", f"{log_format[:40]!r} is not one of kv, json")
    return level, log_format


def _log_level(name: str) -> int:
    """The logging level called ``name`` (any case); InvalidArgument naming the choices."""
    level = logging.getLevelNamesMapping().get(name.strip().upper())
    if level is None:
        raise InvalidArgument("--log-level", f"{name[:40]!r} is not one of {', '.join(LEVELS)}")
    return level


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
WORKER_STORE_WAIT = 366 * 86400.0
"""How long ``querator worker`` waits for an unreachable store at start-up (for ever)."""
