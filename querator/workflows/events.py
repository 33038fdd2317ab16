"""Events by name: ``emit_event`` from anywhere, ``wait_for_event`` in a body.

Fan-in by a correlation key (Inngest's ``waitForEvent``, Absurd's
``await_event``): every run waiting on a name is woken by the commit that
emits it, and a run that starts waiting later still sees it. The first emit of
a name wins and is kept for :data:`~querator.workflows.keys.EVENT_RETENTION`
(the events queue's ``expire_timeout``); how waits and emits meet without a
lost wake-up is told in :mod:`.engine.event_waits`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from querator.errors import Conflict, QueueNotFound, UsageError
from querator.queue.client import QueueClient
from querator.queue.models import Item, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.workflows.engine.commit import transact_creating
from querator.workflows.engine.context import CURRENT
from querator.workflows.engine.event_waits import (
    EventRecord,
    EventWaiter,
    emit_wake,
    event_item,
    forget_waiters,
    wait_value,
)
from querator.workflows.keys import (
    EVENTS_QUEUE,
    RESULTS_QUEUE,
    event_waiters_prefix,
    named_event_key,
)
from querator.workflows.messages import check_topic, check_value

__all__ = [
    "emit_event",
    "emit_event_async",
    "wait_for_event",
    "wait_for_event_async",
]


def _check_emit(name: object, payload: object) -> tuple[str, str]:
    """(name, payload as JSON text), once both are checked."""
    return check_topic(name, "name"), check_value(payload, "payload")


async def _waiters(aq: AsyncQueueClient, name: str) -> list[StoredItem]:
    """The waiter records of ``name`` (runs parked in ``wait_for_event(name)``)."""
    prefix, after, found = event_waiters_prefix(name), None, []
    while True:
        try:
            page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=after, limit=1000)
        except QueueNotFound:  # no run was ever started: none waits
            return []
        found += page
        if len(page) < 1000:
            return found
        after = page[-1].dedup_key


def _wakes(waiters: Sequence[StoredItem]) -> dict[str, list[Item]]:
    """A fresh wake for each waiter, per workflow queue."""
    produce: dict[str, list[Item]] = {}
    for item in waiters:
        waiter = EventWaiter.model_validate_json(item.payload)
        produce.setdefault(waiter.queue, []).append(emit_wake(waiter))
    return produce


async def _drop_expired(aq: AsyncQueueClient, name: str) -> None:
    """Delete the event kept under ``name`` if it is past its retention (the
    queue's maintenance had not deleted it yet), so this emit stores anew."""
    key = named_event_key(name)
    try:
        item = (await aq.lookup(EVENTS_QUEUE, [key])).get(key)
        if item is not None and item.expire_at <= aq.clock.now():
            await aq.delete_items(EVENTS_QUEUE, [item.id])
    except (QueueNotFound, Conflict):
        pass


async def emit_event_async(aq: AsyncQueueClient, name: str, payload: Any) -> bool:
    """:func:`emit_event` for async callers (an :class:`AsyncQueueClient`)."""
    name, text = _check_emit(name, payload)
    await _drop_expired(aq, name)
    record = EventRecord(value=text, emit_id=uuid.uuid4().hex)
    waiting = await _waiters(aq, name)
    produce = {EVENTS_QUEUE: [event_item(name, record)], **_wakes(waiting)}
    key = named_event_key(name)
    result = await transact_creating(aq, [], produce, lookup={EVENTS_QUEUE: [key]})
    stored = result.found.get(EVENTS_QUEUE, {}).get(key)
    first = (
        stored is not None
        and EventRecord.model_validate_json(stored.payload).emit_id == record.emit_id
    )
    # Runs that parked since the first look: committed before the event, their
    # confirming wake may have looked before it too.
    seen = {item.id for item in waiting}
    late = [item for item in await _waiters(aq, name) if item.id not in seen]
    if late:
        await transact_creating(aq, [], _wakes(late))
    await forget_waiters(aq, waiting + late)
    return first


def emit_event(q: QueueClient, name: str, payload: Any) -> bool:
    """Emit event ``name`` with ``payload`` (anything JSON holds): every run
    waiting in ``wait_for_event(name)`` is woken by this commit, and runs that
    wait for it later see it too, while it is kept (7 days by default:
    :data:`~querator.workflows.keys.EVENT_RETENTION`).

    The first emit of a name wins: it returns True; an emit of a name already
    emitted (and kept) returns False, stores nothing and wakes the runs
    waiting for it all the same, so an emit that failed midway can be sent
    again. Names are 1-200 letters, digits, ``.``, ``_``, ``:`` or ``-``
    (``order:42.paid``). A bad name or a payload that is not JSON raises
    :class:`~querator.errors.InvalidArgument` before anything is written.
    """
    _check_emit(name, payload)
    result: bool = q.call(emit_event_async, q.aio, name, payload)
    return result


def _check_wait(name: object, timeout: object) -> float | None:
    check_topic(name, "name")
    if timeout is None:
        return None
    return check_duration("timeout", timeout, allow_zero=True)


def wait_for_event(name: str, timeout: float | None = None) -> Any:
    """Inside a workflow body: the payload of the event emitted under ``name``
    (:func:`emit_event`), waiting for it up to ``timeout`` seconds (None: for
    ever); None when the timeout comes first (emit a payload other than null
    to tell the two apart).

    An event emitted before the call (and still kept) is returned at once.
    The run holds no worker while it waits: its body is parked and woken by
    the emit's commit, or by a timer at the timeout (counted from the first
    time the body reached this call). What it read is stored in the run's
    history, so a replay reads the same here.
    """
    seconds = _check_wait(name, timeout)
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("wait_for_event() is called inside a workflow body only")
    return wait_value(ctx.wait_for_event(name, seconds))[1]


async def wait_for_event_async(name: str, timeout: float | None = None) -> Any:
    """:func:`wait_for_event` for async workflow bodies."""
    _check_wait(name, timeout)
    if CURRENT.get() is None:
        raise UsageError("wait_for_event_async() is called inside a workflow body only")
    return wait_for_event(name, timeout)
