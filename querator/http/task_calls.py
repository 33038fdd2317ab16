"""The HTTP clients' background-task methods: ``/v1/tasks.*`` from Python.

Same arguments, answers and errors as the library's
:func:`~querator.tasks.defer_by_name` and :func:`~querator.tasks.list_tasks`
(the client in place of the first argument), plus ``task_status``, a task's
kept outcome (what ``TaskHandle.result`` waits for), ``cancel_task``
(``TaskHandle.cancel``) and ``retry_tasks`` (``retry_failed``). :class:`AsyncTaskCalls`
is mixed into :class:`querator.http.AsyncQuerator`, :class:`TaskCalls` into
:class:`querator.http.Querator`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from querator.errors import InvalidArgument
from querator.http.callers import LoopOwner, Poster
from querator.http.durations import format_duration
from querator.http.wire.tasks import (
    CancelTaskReply,
    DeferReply,
    ListTasksReply,
    RetryTasksReply,
    TaskStatusReply,
)
from querator.queue.validation import (
    check_count,
    check_duration,
    check_name,
    check_priority,
    check_sequence,
)
from querator.tasks.layout import TASK_QUEUE
from querator.tasks.listing import TaskInfo


class AsyncTaskCalls:
    """Background tasks over HTTP (see :mod:`querator.tasks`)."""

    async def defer_task(
        self: Poster,
        name: str,
        arguments: Mapping[str, Any],
        *,
        queue: str | None = None,
        delay: float | None = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
    ) -> tuple[str, str]:
        """See :func:`querator.tasks.defer_by_name`: defer a call of task
        ``name`` (its arguments by parameter name); its item id and task id."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("name", f"must be a task's persisted name, got {name!r}")
        if not isinstance(arguments, Mapping):
            raise InvalidArgument("args", "must be the task's arguments by parameter name")
        body: dict[str, Any] = {"name": name, "args": dict(arguments)}
        if queue is not None:
            body["queue"] = check_name("queue", queue)
        if delay is not None:
            body["delay"] = format_duration(check_duration("delay", delay, allow_zero=True))
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if priority is not None:
            body["priority"] = check_priority("priority", priority)
        reply = await self._post("/v1/tasks.defer", body, DeferReply)
        return reply.id, reply.task_id

    async def list_tasks(
        self: Poster,
        queue: str = TASK_QUEUE,
        *,
        failed: bool = False,
        name: str | None = None,
        limit: int = 1000,
    ) -> list[TaskInfo]:
        """See :func:`querator.tasks.list_tasks`."""
        body = {
            "queue": check_name("queue", queue),
            "failed": bool(failed),
            "name": name,
            "limit": check_count("limit", limit, 1, 10_000),
        }
        return (await self._post("/v1/tasks.list", body, ListTasksReply)).tasks

    async def task_status(self: Poster, task_id: str) -> TaskStatusReply:
        """The kept outcome of task ``task_id`` (``@task(keep_result=True)``):
        ``done`` false until it has one, then ``ok`` with ``result``, or its error."""
        if not isinstance(task_id, str) or not 1 <= len(task_id) <= 64:
            raise InvalidArgument("task_id", f"must be a task id, got {task_id!r}")
        return await self._post("/v1/tasks.status", {"task_id": task_id}, TaskStatusReply)

    async def cancel_task(self: Poster, item_id: str, queue: str = TASK_QUEUE) -> bool:
        """See :meth:`querator.tasks.TaskHandle.cancel`: remove the task whose
        item is ``item_id`` if no worker has started it; True if removed."""
        if not isinstance(item_id, str) or not item_id:
            raise InvalidArgument("id", f"must be a task's item id, got {item_id!r}")
        body = {"id": item_id, "queue": check_name("queue", queue)}
        return (await self._post("/v1/tasks.cancel", body, CancelTaskReply)).cancelled

    async def retry_tasks(
        self: Poster, queue: str = TASK_QUEUE, ids: Sequence[str] | None = None
    ) -> int:
        """``querator tasks retry``: send failed tasks of ``queue`` (``ids``, or
        all) back with fresh attempts, dropping the failure a task kept; how
        many were sent."""
        body: dict[str, Any] = {"queue": check_name("queue", queue), "ids": None}
        if ids is not None:
            body["ids"] = list(check_sequence("ids", ids, "failed task ids"))
        return (await self._post("/v1/tasks.retry", body, RetryTasksReply)).count


class TaskCalls:
    """The sync twins of :class:`AsyncTaskCalls`, run on the client's loop."""

    def defer_task(
        self: LoopOwner,
        name: str,
        arguments: Mapping[str, Any],
        *,
        queue: str | None = None,
        delay: float | None = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
    ) -> tuple[str, str]:
        """See :meth:`AsyncTaskCalls.defer_task`."""
        ids: tuple[str, str] = self.call(
            self.aio.defer_task,
            name,
            arguments,
            queue=queue,
            delay=delay,
            idempotency_key=idempotency_key,
            priority=priority,
        )
        return ids

    def list_tasks(
        self: LoopOwner,
        queue: str = TASK_QUEUE,
        *,
        failed: bool = False,
        name: str | None = None,
        limit: int = 1000,
    ) -> list[TaskInfo]:
        """See :meth:`AsyncTaskCalls.list_tasks`."""
        found: list[TaskInfo] = self.call(
            self.aio.list_tasks, queue, failed=failed, name=name, limit=limit
        )
        return found

    def task_status(self: LoopOwner, task_id: str) -> TaskStatusReply:
        """See :meth:`AsyncTaskCalls.task_status`."""
        status: TaskStatusReply = self.call(self.aio.task_status, task_id)
        return status

    def cancel_task(self: LoopOwner, item_id: str, queue: str = TASK_QUEUE) -> bool:
        """See :meth:`AsyncTaskCalls.cancel_task`."""
        cancelled: bool = self.call(self.aio.cancel_task, item_id, queue)
        return cancelled

    def retry_tasks(
        self: LoopOwner, queue: str = TASK_QUEUE, ids: Sequence[str] | None = None
    ) -> int:
        """See :meth:`AsyncTaskCalls.retry_tasks`."""
        count: int = self.call(self.aio.retry_tasks, queue, ids)
        return count
