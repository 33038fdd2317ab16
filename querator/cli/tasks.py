"""``querator tasks``: defer a task by name, list waiting and failed tasks, retry."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, app
from querator.cli.help_format import CliGroup
from querator.cli.output import _json_list, _table, _when
from querator.errors import InvalidArgument
from querator.queue.options import DEFAULT_URL
from querator.tasks.deferring import defer_by_name
from querator.tasks.handles import retry_failed
from querator.tasks.layout import TASK_QUEUE
from querator.tasks.listing import list_tasks

tasks_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Background tasks.")
app.add_typer(tasks_app, name="tasks")

Queue = Annotated[str, typer.Option(help="The tasks' queue.")]


def _arguments(text: str) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise InvalidArgument("--args", f"{constant} is not JSON (no NaN or infinity)")

    try:
        value = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("--args", f"is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("--args", "must be a JSON object of the task's parameters by name")
    return value


@tasks_app.command("defer")
def tasks_defer(
    name: Annotated[str, typer.Argument(help="The task's persisted name.")],
    args: Annotated[
        str, typer.Option("--args", help="JSON object of the task's parameters by name.")
    ] = "{}",
    queue: Annotated[
        str | None, typer.Option(help="The task's queue (default querator.tasks).")
    ] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds to wait before it runs.")] = None,
    idempotency_key: Annotated[
        str | None, typer.Option(help="Defer once while a task with this key waits or runs.")
    ] = None,
    priority: Annotated[
        int | None,
        typer.Option(help="The item's priority, -32768 to 32767; higher runs first."),
    ] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Defer a call of task NAME; print its item id and task id.

    The worker checks the arguments against the task's signature: a call that
    does not fit is dead-lettered saying why."""
    with _reporting():
        arguments = _arguments(args)
        with _store(url) as q:
            item_id, task_id = defer_by_name(
                q,
                name,
                arguments,
                queue=queue,
                delay=delay,
                idempotency_key=idempotency_key,
                priority=priority,
            )
    typer.echo(f"{item_id} {task_id}")


@tasks_app.command("list")
def tasks_list(
    queue: Queue = TASK_QUEUE,
    name: Annotated[str | None, typer.Option(help="Only this task's calls.")] = None,
    failed: Annotated[bool, typer.Option(help="The dead-lettered tasks, with why.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 1000,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """List tasks waiting, scheduled or running, or with --failed the failed ones.

    Oldest first; a count per task name ends the table."""
    with _reporting(), _store(url) as q:
        found = list_tasks(q, queue, failed=failed, name=name, limit=limit)
    if as_json:
        _json_list(found)
        return
    rows = [["ID", "NAME", "STATE", "ATTEMPTS", "AVAILABLE_AT", "REASON"]]
    for info in found:
        reason = (info.reason or "-").splitlines()[0][:80] if info.reason else "-"
        row = [info.id, info.name, info.state, str(info.attempts), _when(info.available_at)]
        rows.append([*row, reason])
    _table(rows)
    counts: dict[str, int] = {}
    for info in found:
        counts[info.name] = counts.get(info.name, 0) + 1
    for task_name, n in sorted(counts.items()):
        typer.echo(f"{task_name}: {n}")


@tasks_app.command("retry")
def tasks_retry(
    ids: Annotated[list[str] | None, typer.Argument(help="Item ids of failed tasks.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every failed task of the queue.")] = False,
    queue: Queue = TASK_QUEUE,
    url: Url = DEFAULT_URL,
) -> None:
    """Send failed (dead-lettered) tasks back to their queue, with fresh attempts."""
    with _reporting():
        if not ids and not all_:
            raise InvalidArgument("ids", "name the failed tasks to retry, or give --all")
        if ids and all_:
            raise InvalidArgument("ids", "give ids or --all, not both")
        with _store(url) as q:
            sent = retry_failed(q, queue, ids or None)
    typer.echo(f"{sent} task(s) sent back to {queue}")
