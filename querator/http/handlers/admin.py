"""Handlers of ``/v1/queues.*`` and ``/v1/storage/*``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from querator.http.wire.admin import (
    CreateReply,
    DeleteRequest,
    ImportRequest,
    ItemsDeleteRequest,
    ItemsListReply,
    ItemsListRequest,
    ListReply,
    ListRequest,
    MaintenanceReply,
    QueueInfo,
)
from querator.http.wire.items import StorageItem
from querator.http.wire.queue import Empty, QueueRequest
from querator.queue.ids import parse_id
from querator.queue.models import QueueSettings, StoredItem
from querator.queue.service import AsyncQueueClient

DEFAULT_LIMIT = 100
"""Page size when a list call gives ``limit`` 0 (protobuf's "unset")."""


async def create(aq: AsyncQueueClient, body: QueueInfo) -> CreateReply:
    """Create a queue (the defaults of QueueSettings fill fields left out)."""
    info = await aq.create_queue(
        body.queue_name, body.settings(QueueSettings()), exist_ok=body.exist_ok
    )
    return CreateReply(queue=QueueInfo.of(info))


async def update(aq: AsyncQueueClient, body: QueueInfo) -> CreateReply:
    """Change the fields given; the others keep their values."""
    current = await aq.get_queue(body.queue_name)
    info = await aq.update_queue(body.queue_name, body.settings(current.settings))
    return CreateReply(queue=QueueInfo.of(info))


async def info(aq: AsyncQueueClient, body: QueueRequest) -> QueueInfo:
    """One queue's settings."""
    return QueueInfo.of(await aq.get_queue(body.queue_name))


async def pause(aq: AsyncQueueClient, body: QueueRequest) -> QueueInfo:
    """Pause a queue: its items are not leased until it is resumed."""
    return QueueInfo.of(await aq.pause_queue(body.queue_name))


async def resume(aq: AsyncQueueClient, body: QueueRequest) -> QueueInfo:
    """Resume a paused queue: its items are leased again."""
    return QueueInfo.of(await aq.resume_queue(body.queue_name))


async def list_queues(aq: AsyncQueueClient, body: ListRequest) -> ListReply:
    """Queues in name order from ``pivot``."""
    found = await aq.list_queues(body.pivot or None, body.limit or DEFAULT_LIMIT)
    return ListReply(items=[QueueInfo.of(one) for one in found])


async def delete(aq: AsyncQueueClient, body: DeleteRequest) -> None:
    """Delete a queue; one that holds items only with ``force``."""
    await aq.delete_queue(body.queue_name, force=body.force)


async def list_items(aq: AsyncQueueClient, body: ItemsListRequest) -> ItemsListReply:
    """Items of one partition, in id order."""
    return await _listed(aq.list_items, body)


async def list_scheduled(aq: AsyncQueueClient, body: ItemsListRequest) -> ItemsListReply:
    """Scheduled items of one partition, in id order."""
    return await _listed(aq.list_scheduled, body)


async def _listed(
    lister: Callable[..., Awaitable[list[StoredItem]]], body: ItemsListRequest
) -> ItemsListReply:
    found = await lister(
        body.queue_name,
        partition=body.partition,
        pivot=body.pivot or None,
        limit=body.limit or DEFAULT_LIMIT,
    )
    return ItemsListReply(items=[StorageItem.of(item) for item in found])


async def import_items(aq: AsyncQueueClient, body: ImportRequest) -> ItemsListReply:
    """Add the items as new items; reply with them as stored."""
    ids = await aq.produce(body.queue_name, [item.to_item() for item in body.items])
    stored = []
    for item_id in ids:
        address = parse_id(item_id)
        partition = address.partition if address else 0
        page = await aq.list_items(body.queue_name, partition=partition, pivot=item_id, limit=1)
        stored += [StorageItem.of(item) for item in page if item.id == item_id]
    return ItemsListReply(items=stored)


async def delete_items(aq: AsyncQueueClient, body: ItemsDeleteRequest) -> None:
    """Delete items by id whatever their state."""
    if not body.ids:
        raise ValueError("ids is invalid; cannot be empty")
    for item_id in body.ids:
        if parse_id(item_id) is None:
            raise ValueError(
                f"invalid storage id; '{item_id}': expected '<queue_id>.<partition>.<seq>'"
            )
    await aq.delete_items(body.queue_name, body.ids)


async def maintain(aq: AsyncQueueClient, body: Empty) -> MaintenanceReply:
    """Dead-letter every exhausted or expired unheld item now."""
    return MaintenanceReply(moved=await aq.run_maintenance())
