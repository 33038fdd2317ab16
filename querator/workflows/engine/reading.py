"""What a body parked on ``recv`` or ``wait_for_event`` reads now, how that read is stored (one
outcome per position, whichever worker stores it first), and the ``set_event``
records the engine's next move carries: the driver's part of messages to a run
(see :mod:`.mailbox` for how messages are stored)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypeVar, cast

from querator.errors import Conflict
from querator.queue.models import Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import merge_items
from querator.workflows.engine.committer import Hand
from querator.workflows.engine.context import Recv, WaitEvent
from querator.workflows.engine.decisions import received
from querator.workflows.engine.event_waits import (
    EventRecord,
    find_event,
    forget_waiters,
    is_event_wake,
    wait_read,
)
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.mailbox import consumed, oldest_unread
from querator.workflows.keys import RESULTS_QUEUE, event_waiter_key, is_wake, step_key
from querator.workflows.stored import StepRecord, record_item

__all__ = [
    "Ahead",
    "after_read",
    "look_ahead",
    "parked_on",
    "read_now",
    "store_read",
    "with_published",
]

A = TypeVar("A")


@dataclass(frozen=True)
class Ahead:
    """What a wait for a message or an event found, looked up ahead (while its
    wake looked up the run's state): the request it was looked up for, and the
    oldest unread message (a ``recv``) or the event emitted (a ``wait_for_event``)."""

    request: Recv | WaitEvent
    found: StoredItem | EventRecord | None


async def look_ahead(aq: AsyncQueueClient, live: LiveRun, request: Recv | WaitEvent) -> Ahead:
    """What a body parked on ``request`` would read, looked up now."""
    if isinstance(request, WaitEvent):
        return Ahead(request, await find_event(aq, request.name))
    read = consumed(live.ctx.records)
    return Ahead(request, await oldest_unread(aq, live.run_id, request.topic, read))


async def read_now(
    aq: AsyncQueueClient,
    live: LiveRun,
    request: object,
    wake: Leased,
    ahead: Ahead | None = None,
) -> tuple[int, StepRecord] | None:
    """When the body asks a ``recv`` (``request``), what it reads now
    (:func:`.decisions.received`) and at which position: the oldest message it
    has not read, or its timeout; None: it waits (parked, woken by the next
    send's wake, or its timer's), or asked something else (a wait for an event
    likewise). ``ahead``: what :func:`look_ahead` found for this very request
    since the wake was leased (not looked up again)."""
    known = ahead is not None and ahead.request == request
    if isinstance(request, WaitEvent):
        if known and ahead is not None:
            event = cast(EventRecord | None, ahead.found)
        else:
            event = await find_event(aq, request.name)
        fired = _timer_fired(wake, request.position)
        record = wait_read(request.name, event, request.until, fired, aq.clock.now())
        return None if record is None else (request.position, record)
    if not isinstance(request, Recv):
        return None
    if known and ahead is not None:
        item = cast(StoredItem | None, ahead.found)
    else:
        item = await oldest_unread(aq, live.run_id, request.topic, consumed(live.ctx.records))
    message = None
    if item is not None and item.dedup_key is not None:
        message = (item.dedup_key, item.payload.decode())
    record = received(request, message, _timer_fired(wake, request.position), aq.clock.now())
    return None if record is None else (request.position, record)


def _timer_fired(wake: Leased, position: int) -> bool:
    """Whether ``wake`` is the timeout's wake of the wait at ``position``."""
    tag = (wake.dedup_key or "").removesuffix("/r").rpartition("/")[2]
    return is_wake(wake.kind) and tag == str(position)


def parked_on(request: A, wake: Leased) -> A:
    """What the body parks on when ``read_now`` found nothing for ``request``: a
    wait for an event parked on an emit's or confirming wake commits no
    confirming wake again (see :mod:`.event_waits`)."""
    if isinstance(request, WaitEvent) and is_event_wake(wake):
        return cast(A, replace(request, confirm=False))
    return request


async def after_read(
    aq: AsyncQueueClient, run_id: str, request: object, stored: Mapping[str, StoredItem]
) -> None:
    """Once a wait for an event read its outcome: its waiter record goes
    (``stored``: what :func:`store_read` found, the waiter record among it)."""
    if isinstance(request, WaitEvent):
        found = stored.get(event_waiter_key(request.name, run_id, request.position))
        if found is not None:
            await forget_waiters(aq, [found])


async def store_read(
    aq: AsyncQueueClient,
    held: Leased,
    live: LiveRun,
    request: object,
    position: int,
    record: StepRecord,
) -> dict[str, StoredItem] | None:
    """Store what the body read at ``position`` before it goes on, and give the
    body the outcome stored there: ``record``, or the one another worker stored
    first. None: ``held`` (the item in hand) was taken from this worker; the
    body must go. Else the records the commit looked up (for a wait for an
    event, its waiter record: :func:`after_read`).

    Two workers may handle two wakes of one run at once (a timeout with a
    send, two sends committed out of order) and read different outcomes for
    one ``recv``. The record's key is the run's position, so only the first
    commit stores one; each worker then reads what is stored, after its own
    commit, and goes on with that: one outcome, and a message another worker
    read but did not store stays unread. The commit is fenced by ``held``'s
    version (a worker whose item was leased again decides nothing); on
    PostgreSQL the commit, its fence and its read-back are one statement.
    """
    key = step_key(live.run_id, position)
    item = record_item(key, record, live.run_id)
    keys = [key]
    if isinstance(request, WaitEvent):
        keys.append(event_waiter_key(request.name, live.run_id, request.position))
    try:
        done = await aq.commit(
            depends=[held],
            produce={RESULTS_QUEUE: [item]},
            silent=(RESULTS_QUEUE,),
            lookup={RESULTS_QUEUE: keys},
        )
    except Conflict:
        return None
    # The commit's lookup reads the keys after the change with a snapshot of its
    # own (PostgreSQL: in the same statement; the other stores: right after), so
    # it sees a record another worker committed while this commit waited on it.
    found = done.found.get(RESULTS_QUEUE, {})
    stored = found.get(key)
    if stored is not None:
        record = StepRecord.model_validate_json(stored.payload)
    live.ctx.add(position, record)
    return found


def with_published(hand: Hand, live: LiveRun) -> Hand:
    """``hand`` carrying the body's ``set_event`` records since its last move."""
    published = live.ctx.take_published()
    if not published:
        return hand
    return replace(hand, produce=merge_items(hand.produce, {RESULTS_QUEUE: published}))
