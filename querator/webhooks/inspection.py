"""Reading the attempts log and the failed deliveries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

from pydantic import ValidationError

from querator.queue.models import StoredItem
from querator.queue.routing import partition_for_key
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH
from querator.webhooks.layout import (
    ATTEMPT_KIND,
    ATTEMPT_PARTITIONS,
    ATTEMPTS,
    DEAD,
    Attempt,
    Delivery,
    Kept,
    attempt_key,
)
from querator.webhooks.outcomes import REASON_HEADER
from querator.webhooks.sending import get_message

__all__ = ["FailedDelivery", "attempts_of_endpoint", "attempts_of_message", "failed"]

PAGE = 500
SEQ_STEP = 10


class FailedDelivery(Kept):
    """A delivery that used its last attempt (or whose endpoint was gone or
    disabled), waiting in the dead queue to be re-driven."""

    id: str
    """Its id in the dead queue: what ``redrive(delivery_id)`` takes."""
    message_id: str
    endpoint_id: str
    event_type: str
    attempts: int
    """Attempts made so far, re-drives included."""
    reason: str
    failed_at: datetime


async def items_of(
    aq: AsyncQueueClient, queue: str, partition: int = 0
) -> AsyncIterator[StoredItem]:
    """Every item of one partition, in id order."""
    pivot: str | None = None
    while True:
        page = await aq.list_items(queue, partition=partition, pivot=pivot, limit=PAGE)
        for item in page:
            if item.id != pivot:
                yield item
        if len(page) < PAGE:
            return
        pivot = page[-1].id


async def attempts_of_message(
    aq: AsyncQueueClient, message_id: str, endpoint_id: str | None
) -> list[Attempt]:
    """Every recorded attempt of ``message_id`` (to ``endpoint_id`` only, if given),
    by endpoint then time."""
    message = await get_message(aq, message_id)
    active = [e for e in message.endpoints if endpoint_id is None or e == endpoint_id]
    found: list[Attempt] = []
    base = 0
    per_call = max(1, MAX_BATCH // SEQ_STEP)
    while active:
        still = []
        for start in range(0, len(active), per_call):
            chunk = active[start : start + per_call]
            keys = [attempt_key(message_id, e, base + i) for e in chunk for i in range(SEQ_STEP)]
            got = await aq.lookup(ATTEMPTS, keys)
            for e in chunk:
                mine = [got[k] for k in keys if k in got and k.split("/")[2] == e]
                found += [Attempt.model_validate_json(item.payload) for item in mine]
                if len(mine) == SEQ_STEP:
                    still.append(e)
        active, base = still, base + SEQ_STEP
    return sorted(found, key=lambda a: (a.endpoint_id, a.seq))


async def attempts_of_endpoint(aq: AsyncQueueClient, endpoint_id: str, limit: int) -> list[Attempt]:
    """The ``limit`` newest recorded attempts to ``endpoint_id``, newest first."""
    partition = partition_for_key(endpoint_id, ATTEMPT_PARTITIONS)
    found: list[Attempt] = []
    async for item in items_of(aq, ATTEMPTS, partition):
        if item.reference == endpoint_id and item.kind == ATTEMPT_KIND:
            found.append(Attempt.model_validate_json(item.payload))
    found.sort(key=lambda a: a.at, reverse=True)
    return found[:limit]


def as_failed(item: StoredItem) -> FailedDelivery | None:
    """A dead-queue item as a failed delivery (None: not a delivery)."""
    try:
        delivery = Delivery.model_validate_json(item.payload)
    except ValidationError:
        return None
    reason = item.headers.get(REASON_HEADER) or "expired before it was delivered"
    return FailedDelivery(
        id=item.id,
        message_id=delivery.message_id,
        endpoint_id=delivery.endpoint_id,
        event_type=delivery.event_type,
        attempts=delivery.seq,
        reason=reason,
        failed_at=item.created_at,
    )


async def failed(
    aq: AsyncQueueClient, endpoint_id: str | None, since: datetime | None
) -> AsyncIterator[tuple[StoredItem, FailedDelivery]]:
    """Failed deliveries (of ``endpoint_id``, failed at or after ``since``), oldest first."""
    async for item in items_of(aq, DEAD):
        if endpoint_id is not None and item.reference != endpoint_id:
            continue
        if since is not None and item.created_at < since:
            continue
        shown = as_failed(item)
        if shown is not None:
            yield item, shown
