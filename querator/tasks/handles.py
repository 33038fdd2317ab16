"""Handles of deferred tasks: wait for a kept result, or cancel one not started;
and the retry of failed (dead-lettered) tasks."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from querator.errors import Conflict, InvalidArgument, QueueNotFound, RequestTimeout
from querator.queue.client import QueueClient
from querator.queue.dead_letters import dead_letters_async, requeue_async
from querator.queue.ids import parse_id
from querator.queue.models import Ref
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.tasks.errors import TaskFailed
from querator.tasks.layout import (
    RESULTS_SETTINGS,
    TASK_RESULTS_QUEUE,
    TaskRecord,
    is_task,
    result_key,
)

if TYPE_CHECKING:
    from querator.tasks.spec import TaskSpec

__all__ = [
    "AsyncTaskHandle",
    "TaskHandle",
    "cancel_unstarted",
    "retry_failed",
    "retry_failed_async",
    "stored_outcome",
]

LOOKUP_KEYS = 1000
"""Keys one lookup of kept results asks for."""
WAIT_SLICE = 30.0
"""Longest sleep between looks while waiting for a result (a missed wakeup costs this)."""


class AsyncTaskHandle:
    """A deferred call of a task (from
    :meth:`~querator.tasks.functions.TaskFunction.defer_async`)."""

    def __init__(self, aq: AsyncQueueClient, fn: TaskSpec[..., Any], id: str, task_id: str):
        self.aq = aq
        self.fn = fn
        self.id = id
        """The id of the task's item (a deferral, ``Defer``, makes a new one)."""
        self.task_id = task_id
        """The task's id: the item's ``reference``, the key of its kept result."""

    @property
    def name(self) -> str:
        """The task's persisted name."""
        return self.fn.name

    async def cancel(self) -> bool:
        """Remove the task if no worker has started it; True if removed, False
        when it is running, done, or was never stored here."""
        return await cancel_unstarted(self.aq, self.fn.queue, self.id)

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the task to end: its result, or :class:`TaskFailed`.

        Needs ``@task(keep_result=True)``. Raises :class:`RequestTimeout` after
        ``timeout`` seconds (None: wait forever). Waiting does not poll: it
        sleeps until a result is committed (by any worker) and then looks once.
        """
        if not self.fn.keep_result:
            raise InvalidArgument("result", f"task {self.name!r} has no keep_result=True")
        if timeout is not None:
            timeout = check_duration("timeout", timeout, allow_zero=True)
        deadline = None if timeout is None else anyio.current_time() + timeout
        await self.aq.create_queue(TASK_RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        watch = self.aq.watch(TASK_RESULTS_QUEUE)
        key = result_key(self.task_id)
        while True:
            found = (await self.aq.lookup(TASK_RESULTS_QUEUE, [key])).get(key)
            if found is not None:
                return self._outcome(TaskRecord.model_validate_json(found.payload))
            left = WAIT_SLICE if deadline is None else deadline - anyio.current_time()
            if left <= 0:
                raise RequestTimeout(f"task {self.task_id} did not finish within {timeout}s")
            await watch.wait(min(left, WAIT_SLICE))

    def _outcome(self, record: TaskRecord) -> Any:
        if not record.ok:
            raise TaskFailed(
                self.task_id,
                record.task,
                record.error_type or "Exception",
                record.message or "",
                record.traceback,
            )
        if record.result is None:
            return None
        return self.fn.codec.decode_result(record.result) if self.fn else json.loads(record.result)

    def __repr__(self) -> str:
        return f"<task {self.name!r} {self.task_id} item {self.id}>"


class TaskHandle:
    """A deferred call of a task (from :meth:`~querator.tasks.functions.TaskFunction.defer`); see
    :class:`AsyncTaskHandle`."""

    def __init__(self, q: QueueClient, fn: TaskSpec[..., Any], id: str, task_id: str):
        self.q = q
        self.handle = AsyncTaskHandle(q.aio, fn, id, task_id)
        """The async twin this handle forwards to."""
        self.id = id
        """The id of the task's item."""
        self.task_id = task_id
        """The task's id."""
        self.name = fn.name
        """The task's persisted name."""

    def cancel(self) -> bool:
        """See :meth:`AsyncTaskHandle.cancel`."""
        return self.q.call(self.handle.cancel)

    def result(self, timeout: float | None = None) -> Any:
        """See :meth:`AsyncTaskHandle.result`."""
        return self.q.call(self.handle.result, timeout)

    def __repr__(self) -> str:
        return f"<task {self.name!r} {self.task_id} item {self.id}>"


async def cancel_unstarted(aq: AsyncQueueClient, queue: str, item_id: str) -> bool:
    """Remove task item ``item_id`` of ``queue`` if no worker has started it;
    True if removed (see :meth:`AsyncTaskHandle.cancel`).

    The item is read, then deleted at the version read only if no lease holds
    it, in one statement of the store (``transact(delete=...)``): a worker that
    leases it in between bumps its version, so the delete changes nothing and
    the task runs (never a task that runs and is also reported cancelled)."""
    address = parse_id(item_id)
    if address is None:
        return False
    try:
        found = await aq.list_items(queue, partition=address.partition, pivot=item_id, limit=1)
    except (QueueNotFound, InvalidArgument):  # no such queue, or an id of another
        return False
    if not found or found[0].id != item_id:
        return False
    item = found[0]
    if item.attempts > 0 or item.lease_deadline is not None:
        return False
    try:
        await aq.transact(delete=[Ref(queue, item.id, item.version)])
    except Conflict:
        return False  # leased (started) or gone since it was read
    return True


async def retry_failed_async(
    aq: AsyncQueueClient, queue: str, ids: Sequence[str] | None = None
) -> int:
    """Send failed tasks of ``queue`` (the dead letters ``ids``, or all of them)
    back to it with fresh attempts; how many were sent. The failure a task
    kept (``keep_result=True``) is dropped first, so that the retry's outcome
    is the one kept and :meth:`AsyncTaskHandle.result` waits for it."""
    dead = await dead_letters_async(aq, queue)
    chosen = dead if ids is None else [item for item in dead if item.id in set(ids)]
    keys = [result_key(item.reference) for item in chosen if is_task(item.kind)]
    for start in range(0, len(keys), LOOKUP_KEYS):
        try:
            kept = await aq.lookup(TASK_RESULTS_QUEUE, keys[start : start + LOOKUP_KEYS])
        except QueueNotFound:
            break
        if kept:
            with contextlib.suppress(Conflict):  # another retry dropped them first
                await aq.delete_items(TASK_RESULTS_QUEUE, [item.id for item in kept.values()])
    return await requeue_async(aq, queue, ids)


def retry_failed(q: QueueClient, queue: str, ids: Sequence[str] | None = None) -> int:
    """See :func:`retry_failed_async`."""
    return q.call(retry_failed_async, q.aio, queue, ids)


async def stored_outcome(aq: AsyncQueueClient, task_id: str) -> TaskRecord | None:
    """The kept outcome of task ``task_id`` (``keep_result=True``), or None while
    it has none (not finished, not kept, or past its retention)."""
    key = result_key(task_id)
    try:
        found = await aq.lookup(TASK_RESULTS_QUEUE, [key])
    except QueueNotFound:
        return None
    item = found.get(key)
    return TaskRecord.model_validate_json(item.payload) if item is not None else None
