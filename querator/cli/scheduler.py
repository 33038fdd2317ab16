"""``querator scheduler``: fire every schedule of the store, alone (no worker)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from querator.cli.app import Url, _refuse_missing_file, _reporting, app
from querator.cli.loading import load_functions
from querator.cli.worker import WORKER_STORE_WAIT, LogFormat, LogLevel, check_logging
from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.options import DEFAULT_URL
from querator.queue.validation import check_duration
from querator.telemetry.logs import configure_logging
from querator.workflows.cron.scheduler import Scheduler
from querator.workflows.functions import DurableFunction

log = logging.getLogger("querator.scheduler")


@app.command("scheduler")
def scheduler(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="[MODULE[:ATTR]]",
            help="Register the @workflow(schedule=...) schedules found there first.",
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    interval: Annotated[float, typer.Option(help="Longest time between passes, in seconds.")] = 5.0,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "kv",
) -> None:
    """Fire every schedule in the store (whatever its workflow) until SIGTERM or
    SIGINT. Workers fire the schedules of their own workflows already; run this
    for schedules no worker's workflows cover, or with `querator worker
    --no-scheduler`. Any number may run: each tick starts one run."""
    with _reporting():  # bad options: one line, before anything is imported or opened
        level, fmt = check_logging(log_level, log_format)
        try:
            check_duration("interval", interval)
        except InvalidArgument as exc:
            raise InvalidArgument("--interval", exc.rule) from None
    configure_logging(fmt, level, sys.stderr)
    with _reporting():
        functions: list[DurableFunction] = load_functions(target) if target else []
        _refuse_missing_file(url)  # a mistyped SQLite path is an error, not a new store
        with QueueClient(url, wait_for_store=WORKER_STORE_WAIT) as q:
            _run(Scheduler(q, functions, interval=interval))


def _run(fired: Scheduler) -> None:
    """Run until SIGTERM or SIGINT (:meth:`Scheduler.run` handles them)."""
    log.info("scheduler serving: fires every schedule of the store")
    fired.run()
    log.info("scheduler stopped")
