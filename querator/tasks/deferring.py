"""Deferring task calls: validate and encode the arguments, then one produce.

Everything is checked (options, arguments) before anything is written. A call
goes to querator's own connection, or with ``connection=`` to the
application's (PostgreSQL or SQLite: :mod:`querator.queue.foreign`), where it exists
exactly when that transaction commits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.client import QueueClient
from querator.queue.foreign import produce_on, produce_on_async
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import (
    MAX_BATCH,
    check_duration,
    check_instant,
    check_name,
    check_priority,
)
from querator.tasks.handles import AsyncTaskHandle, TaskHandle
from querator.tasks.layout import (
    DEAD_SETTINGS,
    ENCODING,
    RESULTS_SETTINGS,
    TASK_DEAD_QUEUE,
    TASK_QUEUE,
    TASK_RESULTS_QUEUE,
    TASK_SETTINGS,
    dedup_key,
    task_id_for,
    task_kind,
)
from querator.tasks.spec import DEFER_OPTIONS, TaskSpec, registered_task
from querator.workflows.step_context import current_step

__all__ = [
    "defer",
    "defer_async",
    "defer_by_name",
    "defer_by_name_async",
    "defer_many",
    "defer_many_async",
    "ensure_task_queue",
]


@dataclass(frozen=True)
class Deferral:
    """The checked options of one defer call and the items it produces."""

    items: list[Item]
    task_ids: list[str]
    connection: object


def _priority(fn: TaskSpec[..., Any], options: Mapping[str, Any]) -> int:
    """The priority of a deferral's items: ``priority=``, else the task's."""
    priority = options.get("priority")
    return fn.priority if priority is None else check_priority("priority", priority)


def _options(options: Mapping[str, Any]) -> tuple[float | None, datetime | None, str | None]:
    unknown = [name for name in options if name not in DEFER_OPTIONS]
    if unknown:
        raise InvalidArgument(unknown[0], f"is not an option of defer ({', '.join(DEFER_OPTIONS)})")
    delay, at = options.get("delay"), check_instant("at", options.get("at"))
    if delay is not None and at is not None:
        raise InvalidArgument("delay", "give delay or at, not both")
    if delay is not None:
        delay = check_duration("delay", delay, allow_zero=True)
    key = options.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 400):
        raise InvalidArgument("idempotency_key", "must be a string of 1 to 400 characters")
    return delay, at, key


def plan(
    fn: TaskSpec[..., Any],
    calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
    options: Mapping[str, Any],
    now: datetime,
) -> Deferral:
    """The items of ``calls`` (each ``(args, kwargs)``), or InvalidArgument."""
    if not isinstance(fn, TaskSpec):
        raise InvalidArgument("task", f"{fn!r} is not a @task function")
    delay, at, key = _options(options)
    priority = _priority(fn, options)
    if not 1 <= len(calls) <= MAX_BATCH:
        raise InvalidArgument("calls", f"must hold 1 to {MAX_BATCH} calls, not {len(calls)}")
    if key is not None and len(calls) > 1:
        raise InvalidArgument("idempotency_key", "is for one call; defer_many takes none")
    when = at if at is not None else (now + timedelta(seconds=delay) if delay else None)
    items, ids = [], []
    for index, call in enumerate(calls):
        if not (isinstance(call, tuple | list) and len(call) == 2):
            raise InvalidArgument(f"calls[{index}]", "must be an (args, kwargs) pair")
        args, kwargs = call
        if not isinstance(args, tuple | list) or not isinstance(kwargs, Mapping):
            raise InvalidArgument(f"calls[{index}]", "must be an (args tuple, kwargs dict) pair")
        text = fn.codec.encode_args(tuple(args), dict(kwargs))
        fn.limit_keys(tuple(args), dict(kwargs))
        task_id = task_id_for(fn.name, key)
        ids.append(task_id)
        items.append(
            Item(
                payload=text.encode(),
                kind=task_kind(fn.name),
                encoding=ENCODING,
                reference=task_id,
                enqueue_at=when,
                dedup_key=dedup_key(task_id) if key is not None else None,
                priority=priority,
            )
        )
    return Deferral(items, ids, options.get("connection"))


def _split(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take ``defer``'s options out of a call's keyword arguments."""
    return {name: kwargs.pop(name) for name in DEFER_OPTIONS if name in kwargs}


async def ensure_task_queue(aq: AsyncQueueClient, queue: str) -> None:
    """Create the task queue ``queue``, its dead queue and the results queue
    unless they exist (an existing queue keeps its settings)."""
    await aq.create_queue(TASK_RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    await aq.create_queue(TASK_DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
    if queue != TASK_DEAD_QUEUE:
        await aq.create_queue(queue, TASK_SETTINGS, exist_ok=True)


async def _produce(aq: AsyncQueueClient, queue: str, items: list[Item]) -> list[str]:
    try:
        return await aq.produce(queue, items)
    except QueueNotFound:
        await ensure_task_queue(aq, queue)
        return await aq.produce(queue, items)


_ENSURED: set[tuple[int, str]] = set()
"""(client, queue) pairs whose task queue this process made sure exists."""


async def _ensure_once(aq: AsyncQueueClient, queue: str) -> None:
    if (id(aq), queue) not in _ENSURED:
        await ensure_task_queue(aq, queue)
        _ENSURED.add((id(aq), queue))


def _in_step(queue: str, deferral: Deferral) -> list[str]:
    """Keep the items for the running step's commit, which produces them with its
    record; their ids ("" each: not stored yet)."""
    step = current_step()
    assert step is not None
    step.deferred.setdefault(queue, []).extend(deferral.items)
    return [""] * len(deferral.items)


def _step_keeps(deferral: Deferral) -> bool:
    """Whether a step is running here and the call names no connection of its own."""
    return deferral.connection is None and current_step() is not None


def _produce_sync(q: QueueClient, queue: str, deferral: Deferral) -> list[str]:
    if _step_keeps(deferral):
        q.call(_ensure_once, q.aio, queue)
        return _in_step(queue, deferral)
    if deferral.connection is None:
        return q.call(_produce, q.aio, queue, deferral.items)
    try:
        return produce_on(q, deferral.connection, queue, deferral.items)
    except QueueNotFound:
        q.call(ensure_task_queue, q.aio, queue)
        return produce_on(q, deferral.connection, queue, deferral.items)


async def _produce_async(aq: AsyncQueueClient, queue: str, deferral: Deferral) -> list[str]:
    if _step_keeps(deferral):
        await _ensure_once(aq, queue)
        return _in_step(queue, deferral)
    if deferral.connection is None:
        return await _produce(aq, queue, deferral.items)
    try:
        return await produce_on_async(aq, deferral.connection, queue, deferral.items)
    except QueueNotFound:
        await ensure_task_queue(aq, queue)
        return await produce_on_async(aq, deferral.connection, queue, deferral.items)


def defer(
    q: QueueClient, fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> TaskHandle:
    """See :meth:`~querator.tasks.functions.TaskFunction.defer`."""
    kwargs = dict(kwargs)
    options = _split(kwargs)
    deferral = plan(fn, [(args, kwargs)], options, q.aio.clock.now())
    [item_id] = _produce_sync(q, fn.queue, deferral)
    return TaskHandle(q, fn, item_id, deferral.task_ids[0])


async def defer_async(
    aq: AsyncQueueClient, fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncTaskHandle:
    """See :meth:`~querator.tasks.functions.TaskFunction.defer_async`."""
    kwargs = dict(kwargs)
    options = _split(kwargs)
    deferral = plan(fn, [(args, kwargs)], options, aq.clock.now())
    [item_id] = await _produce_async(aq, fn.queue, deferral)
    return AsyncTaskHandle(aq, fn, item_id, deferral.task_ids[0])


def defer_many(
    q: QueueClient, fn: TaskSpec[..., Any], calls: Any, options: Mapping[str, Any]
) -> list[TaskHandle]:
    """See :meth:`~querator.tasks.functions.TaskFunction.defer_many`."""
    deferral = plan(fn, _listed(calls), options, q.aio.clock.now())
    ids = _produce_sync(q, fn.queue, deferral)
    return [TaskHandle(q, fn, i, t) for i, t in zip(ids, deferral.task_ids, strict=True)]


async def defer_many_async(
    aq: AsyncQueueClient, fn: TaskSpec[..., Any], calls: Any, options: Mapping[str, Any]
) -> list[AsyncTaskHandle]:
    """See :meth:`~querator.tasks.functions.TaskFunction.defer_many_async`."""
    deferral = plan(fn, _listed(calls), options, aq.clock.now())
    ids = await _produce_async(aq, fn.queue, deferral)
    return [AsyncTaskHandle(aq, fn, i, t) for i, t in zip(ids, deferral.task_ids, strict=True)]


def _listed(calls: Any) -> list[Any]:
    if isinstance(calls, str | bytes | Mapping) or not hasattr(calls, "__iter__"):
        raise InvalidArgument("calls", "must be a list of (args, kwargs) pairs")
    return list(calls)


def _by_name_item(
    name: str,
    arguments: Mapping[str, Any],
    delay: float | None,
    key: str | None,
    now: datetime,
    priority: int | None = None,
) -> tuple[Item, str]:
    """The item of a call of task ``name`` given by keyword ``arguments`` (checked
    by the task's codec when the task is defined in this process)."""
    if not isinstance(name, str) or not 1 <= len(name) <= 512:
        raise InvalidArgument("name", "must be a string of 1 to 512 characters")
    if not isinstance(arguments, Mapping):
        raise InvalidArgument("args", "must be a JSON object of the task's parameters by name")
    delay_at, _, key = _options({"delay": delay, "idempotency_key": key})
    fn = registered_task(name)
    if priority is not None:
        priority = check_priority("priority", priority)
    text = fn.codec.encode_args((), dict(arguments)) if fn else _json_object(arguments)
    if fn is not None:
        fn.limit_keys((), dict(arguments))
    task_id = task_id_for(name, key)
    item = Item(
        payload=text.encode(),
        kind=task_kind(name),
        encoding=ENCODING,
        reference=task_id,
        enqueue_at=now + timedelta(seconds=delay_at) if delay_at else None,
        dedup_key=dedup_key(task_id) if key is not None else None,
        priority=priority if priority is not None else (fn.priority if fn else 0),
    )
    return item, task_id


def _json_object(arguments: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(arguments), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("args", f"cannot be stored as JSON: {exc}") from exc


async def defer_by_name_async(
    aq: AsyncQueueClient,
    name: str,
    arguments: Mapping[str, Any],
    *,
    queue: str | None = None,
    delay: float | None = None,
    idempotency_key: str | None = None,
    priority: int | None = None,
) -> tuple[str, str]:
    """Defer a call of task ``name`` without its function at hand (the CLI, the
    HTTP API): ``arguments`` by parameter name, checked by the task's codec when
    the task is defined in this process, else by the worker (which dead-letters
    a call that does not fit); ``priority``: the item's (default: the task's
    when it is defined here, else 0). Returns the item id and the task id."""
    fn = registered_task(name) if isinstance(name, str) else None
    where = check_name("queue", queue) if queue is not None else (fn.queue if fn else TASK_QUEUE)
    now = aq.clock.now()
    item, task_id = _by_name_item(name, arguments, delay, idempotency_key, now, priority)
    [item_id] = await _produce(aq, where, [item])
    return item_id, task_id


def defer_by_name(
    q: QueueClient,
    name: str,
    arguments: Mapping[str, Any],
    *,
    queue: str | None = None,
    delay: float | None = None,
    idempotency_key: str | None = None,
    priority: int | None = None,
) -> tuple[str, str]:
    """See :func:`defer_by_name_async`."""
    return q.call(
        defer_by_name_async,
        q.aio,
        name,
        arguments,
        queue=queue,
        delay=delay,
        idempotency_key=idempotency_key,
        priority=priority,
    )
