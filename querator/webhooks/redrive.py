"""Re-driving failed deliveries: back into the deliveries queue, schedule reset."""

from __future__ import annotations

import contextlib

from querator.errors import Conflict
from querator.queue.models import Item, Ref, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.webhooks.layout import DEAD, DELIVERIES, Delivery, delivery_item, redrive_key

__all__ = ["redrive_items"]

CHUNK = 200


def _again(item: StoredItem) -> Item:
    delivery = Delivery.model_validate_json(item.payload).model_copy(update={"attempt": 0})
    return delivery_item(delivery).model_copy(update={"dedup_key": redrive_key(item.id)})


async def redrive_items(aq: AsyncQueueClient, items: list[StoredItem]) -> int:
    """Produce a fresh delivery for each dead item and delete the dead item; the
    number re-driven. Each produce depends on its dead item's version, so two
    operators re-driving at once re-drive each delivery once; the fresh item's
    dedup key keeps a re-drive repeated after a crash from doubling it."""
    done = 0
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        try:
            done += await _redrive(aq, chunk)
        except Conflict:  # some were re-driven (or purged) meanwhile: one by one
            for item in chunk:
                with contextlib.suppress(Conflict):
                    done += await _redrive(aq, [item])
    return done


async def _redrive(aq: AsyncQueueClient, items: list[StoredItem]) -> int:
    await aq.transact(
        produce={DELIVERIES: [_again(item) for item in items]},
        depends=[Ref(DEAD, item.id, item.version) for item in items],
    )
    with contextlib.suppress(Conflict):
        await aq.delete_items(DEAD, [item.id for item in items])
    return len(items)
