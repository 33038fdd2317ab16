"""What a body parked on ``recv`` reads now, and the records the engine's next
move carries for it (a message read, ``set_event`` values): the driver's part
of messages to a run (see :mod:`.mailbox` for how messages are stored)."""

from __future__ import annotations

from dataclasses import replace

from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import merge_items
from querator.workflows.engine.committer import Hand
from querator.workflows.engine.context import Recv
from querator.workflows.engine.decisions import received
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.mailbox import consumed, oldest_unread
from querator.workflows.keys import RESULTS_QUEUE, is_wake, step_key
from querator.workflows.stored import StepRecord, record_item

__all__ = ["read_now", "with_published", "with_read"]


async def read_now(
    aq: AsyncQueueClient, live: LiveRun, request: Recv, wake: Leased
) -> StepRecord | None:
    """What a body parked on ``request`` reads now (:func:`.decisions.received`):
    the oldest message it has not read, or its timeout; None: it waits (parked,
    woken by the next send's wake, or its timer's)."""
    read = consumed(live.ctx.records)
    item = await oldest_unread(aq, live.run_id, request.topic, read)
    message = None
    if item is not None and item.dedup_key is not None:
        message = (item.dedup_key, item.payload.decode())
    tag = (wake.dedup_key or "").removesuffix("/r").rpartition("/")[2]
    fired = is_wake(wake.kind) and tag == str(request.position)
    return received(request, message, fired, aq.clock.now())


def with_read(hand: Hand, live: LiveRun, position: int, record: StepRecord) -> Hand:
    """``hand`` carrying the record of what the body read at ``position`` (read
    and recorded at once: the record commits with the next move), which the
    body now has too."""
    live.ctx.add(position, record)
    item = record_item(step_key(live.run_id, position), record, live.run_id)
    return replace(hand, produce=merge_items(hand.produce, {RESULTS_QUEUE: [item]}))


def with_published(hand: Hand, live: LiveRun) -> Hand:
    """``hand`` carrying the body's ``set_event`` records since its last move."""
    published = live.ctx.take_published()
    if not published:
        return hand
    return replace(hand, produce=merge_items(hand.produce, {RESULTS_QUEUE: published}))
