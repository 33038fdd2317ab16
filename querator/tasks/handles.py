"""Handles of deferred tasks: wait for a kept result, or cancel one not started."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio

from querator.errors import Conflict, InvalidArgument, QueueNotFound, RequestTimeout
from querator.queue.client import QueueClient
from querator.queue.ids import parse_id
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.tasks.errors import TaskFailed
from querator.tasks.layout import RESULTS_SETTINGS, TASK_RESULTS_QUEUE, TaskRecord, result_key

if TYPE_CHECKING:
    from querator.tasks.spec import TaskSpec

__all__ = ["AsyncTaskHandle", "TaskHandle", "stored_outcome"]

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
        queue = self.fn.queue
        address = parse_id(self.id)
        if address is None:
            return False
        found = await self.aq.list_items(queue, partition=address.partition, pivot=self.id, limit=1)
        if not found or found[0].id != self.id:
            return False
        item = found[0]
        if item.attempts > 0 or item.lease_deadline is not None:
            return False
        try:
            await self.aq.delete_items(queue, [self.id])
        except Conflict:
            return False
        return True

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
