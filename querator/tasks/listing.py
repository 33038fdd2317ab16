"""Tasks as operators see them: waiting, scheduled, running, or failed (dead)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from querator.errors import InvalidArgument, QueueNotFound
from querator.model_bases import View
from querator.queue.client import QueueClient
from querator.queue.dead_letters import came_from, dead_letters_async
from querator.queue.dead_reasons import ATTEMPTS_HEADER, REASON_HEADER, source_queue
from querator.queue.ids import parse_id
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.tasks.layout import TASK_QUEUE, is_task, prior_attempts, task_name

__all__ = ["TaskInfo", "TaskState", "find_task_async", "list_tasks", "list_tasks_async"]

TaskState = Literal["waiting", "scheduled", "running", "failed"]
"""``failed``: dead-lettered (see :attr:`TaskInfo.reason`)."""

PAGE = 500


class TaskInfo(View):
    """One deferred task call, as :func:`list_tasks` reports it."""

    id: str
    """Its item's id (``querator tasks retry ID`` takes a failed one's)."""
    task_id: str
    name: str
    """The task's persisted name."""
    state: TaskState
    attempts: int
    """Attempts so far (for a failed task: the attempts it used)."""
    available_at: datetime
    created_at: datetime
    reason: str | None = None
    """Why a failed task was dead-lettered (its last error and traceback)."""
    source_queue: str | None = None
    """The queue a failed task was dead-lettered from (None for a letter
    written before querator recorded it)."""


def _info(item: StoredItem, now: datetime, failed: bool) -> TaskInfo:
    state: TaskState
    if failed:
        state = "failed"
    elif item.lease_deadline is not None and item.lease_deadline > now:
        state = "running"
    elif item.available_at > now:
        state = "scheduled"
    else:
        state = "waiting"
    attempts = prior_attempts(item.headers) + item.attempts
    if failed:
        attempts = int(item.headers.get(ATTEMPTS_HEADER, "0") or 0)
    return TaskInfo(
        id=item.id,
        task_id=item.reference,
        name=task_name(item.kind),
        state=state,
        attempts=attempts,
        available_at=item.available_at,
        created_at=item.created_at,
        reason=item.headers.get(REASON_HEADER) if failed else None,
        source_queue=source_queue(item.headers) if failed else None,
    )


async def list_tasks_async(
    aq: AsyncQueueClient,
    queue: str = TASK_QUEUE,
    *,
    failed: bool = False,
    name: str | None = None,
    limit: int = 1000,
) -> list[TaskInfo]:
    """The tasks of ``queue`` (oldest first, at most ``limit``): waiting,
    scheduled and running ones, or with ``failed`` its dead letters; ``name``:
    only that task's. A queue not created yet holds none."""
    now = aq.clock.now()
    try:
        if failed:
            items = await dead_letters_async(aq, queue)
        else:
            items = await _items(aq, queue, limit if name is None else None)
    except QueueNotFound:
        return []
    found = [
        _info(item, now, failed)
        for item in items
        if is_task(item.kind) and (name is None or task_name(item.kind) == name)
    ]
    found.sort(key=lambda info: info.created_at)
    return found[:limit]


async def find_task_async(
    aq: AsyncQueueClient, queue: str, item_id: str
) -> tuple[TaskInfo, StoredItem] | None:
    """Task item ``item_id`` of ``queue``, or of its dead queue (a failed task),
    with its item; None when neither holds a task item of that id."""
    address = parse_id(item_id)
    if address is None:
        return None
    now = aq.clock.now()
    try:
        info = await aq.get_queue(queue)
    except (QueueNotFound, InvalidArgument):
        return None
    places = [(queue, False)]
    if info.settings.dead_queue:
        places.append((info.settings.dead_queue, True))
    for place, failed in places:
        try:
            found = await aq.list_items(place, partition=address.partition, pivot=item_id, limit=1)
        except (QueueNotFound, InvalidArgument):  # no such queue, or an id of another
            continue
        item = found[0] if found and found[0].id == item_id else None
        if item is None or not is_task(item.kind) or (failed and not came_from(item, info)):
            continue
        return _info(item, now, failed), item
    return None


async def _items(aq: AsyncQueueClient, queue: str, limit: int | None) -> list[StoredItem]:
    found: list[StoredItem] = []
    for partition in range((await aq.get_queue(queue)).settings.partitions):
        pivot: str | None = None
        while limit is None or len(found) < limit:
            page = await aq.list_items(queue, partition=partition, pivot=pivot, limit=PAGE)
            fresh = [item for item in page if item.id != pivot]
            found += fresh
            if len(page) < PAGE or not fresh:
                break
            pivot = fresh[-1].id
    return found


def list_tasks(
    q: QueueClient,
    queue: str = TASK_QUEUE,
    *,
    failed: bool = False,
    name: str | None = None,
    limit: int = 1000,
) -> list[TaskInfo]:
    """See :func:`list_tasks_async`."""
    return q.call(list_tasks_async, q.aio, queue, failed=failed, name=name, limit=limit)
