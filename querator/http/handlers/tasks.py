"""Handlers of ``/v1/tasks.*``: each calls the function a Python user calls
(:mod:`querator.tasks.deferring`, :mod:`querator.tasks.listing`)."""

from __future__ import annotations

import json

from querator.http.wire.tasks import (
    CancelTaskReply,
    CancelTaskRequest,
    DeferReply,
    DeferRequest,
    ListTasksReply,
    ListTasksRequest,
    RetryTasksReply,
    RetryTasksRequest,
    TaskStatusReply,
    TaskStatusRequest,
)
from querator.queue.service import AsyncQueueClient
from querator.tasks.deferring import defer_by_name_async
from querator.tasks.handles import cancel_unstarted, retry_failed_async, stored_outcome
from querator.tasks.listing import list_tasks_async


async def defer(aq: AsyncQueueClient, body: DeferRequest) -> DeferReply:
    """Defer a call of a task by name."""
    item_id, task_id = await defer_by_name_async(
        aq,
        body.name,
        body.args,
        queue=body.queue,
        delay=body.delay,
        idempotency_key=body.idempotency_key,
        priority=body.priority,
    )
    return DeferReply(id=item_id, task_id=task_id)


async def list_tasks(aq: AsyncQueueClient, body: ListTasksRequest) -> ListTasksReply:
    """Tasks of a queue: waiting, scheduled and running, or failed."""
    found = await list_tasks_async(
        aq, body.queue, failed=body.failed, name=body.name, limit=body.limit
    )
    return ListTasksReply(tasks=found)


async def status(aq: AsyncQueueClient, body: TaskStatusRequest) -> TaskStatusReply:
    """The kept outcome of a task, once it has one."""
    record = await stored_outcome(aq, body.task_id)
    if record is None:
        return TaskStatusReply(task_id=body.task_id, done=False)
    return TaskStatusReply(
        task_id=body.task_id,
        done=True,
        ok=record.ok,
        result=json.loads(record.result) if record.result is not None else None,
        error_type=record.error_type,
        message=record.message,
        attempts=record.attempts,
    )


async def cancel(aq: AsyncQueueClient, body: CancelTaskRequest) -> CancelTaskReply:
    """Remove a task if no worker has started it (``TaskHandle.cancel``)."""
    return CancelTaskReply(cancelled=await cancel_unstarted(aq, body.queue, body.id))


async def retry(aq: AsyncQueueClient, body: RetryTasksRequest) -> RetryTasksReply:
    """Send failed tasks back to their queue (``querator tasks retry``)."""
    return RetryTasksReply(count=await retry_failed_async(aq, body.queue, body.ids))
