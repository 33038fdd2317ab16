"""Dead letters of a queue: list them, send them back, or purge them.

A queue's dead letters are the items of its ``dead_queue`` (settings) that
came from it: several queues may share one dead queue, and each dead letter
names its source queue (:data:`~querator.queue.dead_reasons.SOURCE_HEADER`,
written by the statement that moves it), so listing, requeueing and purging
the dead letters of one queue never touch another's. A dead letter written
before querator recorded its source is told by its ``source_id`` (which names
the source queue's internal id); one with neither counts for every queue that
shares the dead queue, as before. Sending
one back produces a copy into the queue (fresh attempts, its payload, kind,
encoding, reference, headers and priority) and then deletes it from the dead queue. The
copy's dedup key is the original's, or ``requeue/{dead item id}``: a requeue
interrupted between the two steps and run again finds the copy and adds no
second one, so an item is never lost and at worst left in both places until
the next requeue.

```python
from querator.queue.dead_letters import dead_letters, requeue
for item in dead_letters(q, "orders"):
    print(item.id, item.source_id, item.attempts)
requeue(q, "orders")                 # every dead letter of "orders"; or ids=[...]
```
"""

from __future__ import annotations

from collections.abc import Sequence

from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.dead_reasons import source_queue, unmarked
from querator.queue.ids import parse_id
from querator.queue.models import Item, QueueInfo, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count, check_name, check_sequence

__all__ = [
    "MAX_LIMIT",
    "PAGE",
    "came_from",
    "dead_letter",
    "dead_letter_async",
    "dead_letters",
    "dead_letters_async",
    "dead_queue_of",
    "purge",
    "purge_async",
    "requeue",
    "requeue_async",
]

PAGE = 500
"""Dead letters handled per call to the store."""

MAX_LIMIT = 1_000_000
"""The largest ``limit`` of :func:`dead_letters_async`."""


async def dead_queue_of(aq: AsyncQueueClient, queue: str) -> str:
    """The dead queue of ``queue``; InvalidArgument when it has none."""
    return _dead_of(await aq.get_queue(queue))


def _dead_of(info: QueueInfo) -> str:
    if not info.settings.dead_queue:
        raise InvalidArgument("queue", f"queue {info.name!r} has no dead_queue")
    return info.settings.dead_queue


def came_from(item: StoredItem, queue: QueueInfo) -> bool:
    """Whether dead letter ``item`` was dead-lettered from ``queue`` (see the
    module's docstring for letters that do not say)."""
    source = source_queue(item.headers)
    if source is not None:
        return source == queue.name
    address = parse_id(item.source_id)
    return address is None or address.queue_id == queue.queue_id


async def dead_letters_async(
    aq: AsyncQueueClient, queue: str, limit: int | None = None
) -> list[StoredItem]:
    """The dead letters of ``queue`` (those of its dead queue that came from
    it), in the order they arrived (at most ``limit``: 1 to :data:`MAX_LIMIT`,
    or None for all)."""
    check_name("queue", queue)
    if limit is not None:
        check_count("limit", limit, 1, MAX_LIMIT)
    info = await aq.get_queue(queue)
    dead = _dead_of(info)
    found: list[StoredItem] = []
    for partition in range((await aq.get_queue(dead)).settings.partitions):
        pivot: str | None = None
        while limit is None or len(found) < limit:
            page = await aq.list_items(dead, partition=partition, pivot=pivot, limit=PAGE)
            fresh = [item for item in page if item.id != pivot]
            found += [item for item in fresh if came_from(item, info)]
            if len(page) < PAGE or not fresh:
                break
            pivot = fresh[-1].id
    found.sort(key=lambda item: item.created_at)
    return found if limit is None else found[:limit]


async def dead_letter_async(aq: AsyncQueueClient, queue: str, item_id: str) -> StoredItem:
    """One dead letter of ``queue``, in full; InvalidArgument when ``item_id`` is not one."""
    for item in await dead_letters_async(aq, queue):
        if item.id == item_id:
            return item
    raise InvalidArgument("id", f"{item_id!r} is not a dead letter of {queue!r}")


def _ids(ids: Sequence[str] | None) -> Sequence[str] | None:
    if ids is not None:
        check_sequence("ids", ids, "dead letter ids")
    return ids


async def _chosen(aq: AsyncQueueClient, queue: str, ids: Sequence[str] | None) -> list[StoredItem]:
    items = await dead_letters_async(aq, queue)
    if ids is None:
        return items
    by_id = {item.id: item for item in items}
    missing = [item_id for item_id in ids if item_id not in by_id]
    if missing:
        raise InvalidArgument("ids", f"not dead letters of {queue!r}: {', '.join(missing)}")
    return [by_id[item_id] for item_id in ids]


async def requeue_async(aq: AsyncQueueClient, queue: str, ids: Sequence[str] | None = None) -> int:
    """Send dead letters back to ``queue`` (``ids``, or all); how many were sent."""
    chosen = await _chosen(aq, queue, _ids(ids))
    dead = await dead_queue_of(aq, queue)
    for at in range(0, len(chosen), PAGE):
        batch = chosen[at : at + PAGE]
        copies = [
            Item(
                payload=item.payload,
                kind=item.kind,
                encoding=item.encoding,
                reference=item.reference,
                headers=unmarked(item.headers),
                dedup_key=item.dedup_key or f"requeue/{item.id}",
                priority=item.priority,
            )
            for item in batch
        ]
        await aq.produce(queue, copies)
        await aq.delete_items(dead, [item.id for item in batch])
    return len(chosen)


async def purge_async(aq: AsyncQueueClient, queue: str, ids: Sequence[str] | None = None) -> int:
    """Delete dead letters of ``queue`` (``ids``, or all); how many were deleted."""
    chosen = await _chosen(aq, queue, _ids(ids))
    dead = await dead_queue_of(aq, queue)
    for at in range(0, len(chosen), PAGE):
        await aq.delete_items(dead, [item.id for item in chosen[at : at + PAGE]])
    return len(chosen)


def dead_letters(q: QueueClient, queue: str, limit: int | None = None) -> list[StoredItem]:
    """See :func:`dead_letters_async`."""
    return q.call(dead_letters_async, q.aio, queue, limit)


def dead_letter(q: QueueClient, queue: str, item_id: str) -> StoredItem:
    """See :func:`dead_letter_async`."""
    return q.call(dead_letter_async, q.aio, queue, item_id)


def requeue(q: QueueClient, queue: str, ids: Sequence[str] | None = None) -> int:
    """See :func:`requeue_async`."""
    return q.call(requeue_async, q.aio, queue, ids)


def purge(q: QueueClient, queue: str, ids: Sequence[str] | None = None) -> int:
    """See :func:`purge_async`."""
    return q.call(purge_async, q.aio, queue, ids)
