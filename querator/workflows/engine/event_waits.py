"""Runs waiting for an event by name: what is stored, what a wait reads.

An emitted event is one item of the events queue (:data:`EVENTS_QUEUE`) under
its name: the first emit stores it (dedup), later ones find it. A run parked in
``wait_for_event(name)`` commits, with its park, a *waiter* record
(``events/{name}/waiting/{run}/{position}`` in the results queue) and a
*confirming* wake of its own. An emit commits the event with a wake for every
waiter it found, then looks again and wakes those that registered meanwhile.

No wake-up is lost, whatever the order: a waiter committed before the emit's
second look is woken by the emit; one committed after it was committed after
the event, so its confirming wake (durable, leased after the waiter's commit)
finds the event. Every wake is an item, so a worker killed at any instant
loses none. A wait that reads the event stores it at its position (replays
read it there), like a ``recv``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import Field

from querator.clock import stamp
from querator.errors import Conflict, QueueNotFound
from querator.model_bases import StoredModel
from querator.queue.models import Item, Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import (
    ENCODING,
    EVENTS_QUEUE,
    RESULTS_QUEUE,
    WAIT_EVENT_STEP,
    event_waiter_key,
    named_event_key,
)
from querator.workflows.stored import StepRecord, record_item, wake_item

__all__ = [
    "EVENT_KIND",
    "EventRecord",
    "EventWaiter",
    "confirm_tag",
    "emit_wake",
    "event_item",
    "find_event",
    "forget_waiters",
    "is_event_wake",
    "wait_read",
    "wait_record",
    "wait_value",
    "waiter_item",
]

EVENT_KIND = "querator.event"
"""The kind of an event item in the events queue."""
_EMIT_TAG = "ev-"


class EventRecord(StoredModel):
    """An emitted event, as stored under its name."""

    value: str
    """The payload, as JSON text."""
    emit_id: str = ""
    """Which emit stored it (an emit finds out whether it was the first)."""
    emitted_at: datetime = Field(default_factory=stamp)


class EventWaiter(StoredModel):
    """``events/{name}/waiting/{run}/{position}``: whom an emit of ``name`` wakes."""

    run_id: str
    position: int
    queue: str
    """The run's workflow queue (its wake tasks go there)."""
    workflow: str = ""
    trace: dict[str, str] = Field(default_factory=dict)


def event_item(name: str, record: EventRecord) -> Item:
    """The events-queue item holding the event emitted under ``name``."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=EVENT_KIND,
        encoding=ENCODING,
        reference=name,
        dedup_key=named_event_key(name),
    )


def waiter_item(name: str, waiter: EventWaiter) -> Item:
    """The results-queue record saying ``waiter`` waits for ``name``."""
    key = event_waiter_key(name, waiter.run_id, waiter.position)
    return record_item(key, waiter, waiter.run_id)


def confirm_tag(position: int) -> str:
    """The tag of the wake a wait's first park commits: it looks for the event
    once the waiter record is committed (an emit may have looked before)."""
    return f"e{position}"


def emit_wake(waiter: EventWaiter) -> Item:
    """A wake an emit produces for ``waiter`` (a fresh tag: never merged into a
    wake some worker holds now, which may have looked already)."""
    tag = f"{_EMIT_TAG}{uuid.uuid4().hex}"
    return wake_item(waiter.run_id, tag, trace=waiter.trace, workflow=waiter.workflow)


def is_event_wake(wake: Leased) -> bool:
    """Whether ``wake`` is an emit's or a confirming wake (a park on its account
    commits no confirming wake again: one look per park is enough)."""
    tag = (wake.dedup_key or "").removesuffix("/r").rpartition("/")[2]
    return tag.startswith(_EMIT_TAG) or (tag[:1] == "e" and tag[1:].isdigit())


async def find_event(aq: AsyncQueueClient, name: str) -> EventRecord | None:
    """The event emitted under ``name`` and still kept (None: none, or past its retention)."""
    key = named_event_key(name)
    try:
        item = (await aq.lookup(EVENTS_QUEUE, [key])).get(key)
    except QueueNotFound:
        return None
    if item is None or item.expire_at <= aq.clock.now():
        return None
    return EventRecord.model_validate_json(item.payload)


def wait_record(name: str, event: EventRecord | None) -> StepRecord:
    """The record of a ``wait_for_event``: the event seen, or its timeout (None)."""
    stored: dict[str, Any] = {"event": name, "value": None, "emitted_at": None}
    if event is not None:
        stored.update(value=event.value, emitted_at=event.emitted_at.isoformat())
    return StepRecord(step=WAIT_EVENT_STEP, ok=True, result=json.dumps(stored), attempts=1)


def wait_value(record: StepRecord) -> tuple[bool, Any]:
    """(seen, payload) of a ``wait_for_event`` record; (False, None) for a timeout."""
    stored = json.loads(record.result or "{}")
    text = stored.get("value")
    return (False, None) if text is None else (True, json.loads(text))


def wait_read(
    name: str, event: EventRecord | None, until: datetime | None, timer_fired: bool, now: datetime
) -> StepRecord | None:
    """What a wait for ``name`` reads now: the event when there is one, else its
    timeout once its timer fired or ``until`` passed; None: it waits."""
    if event is not None:
        return wait_record(name, event)
    if timer_fired or (until is not None and now >= until):
        return wait_record(name, None)
    return None


async def forget_waiters(aq: AsyncQueueClient, waiters: list[StoredItem]) -> None:
    """Delete waiter records whose wait is over (their run was woken, or read
    the event or its timeout): a leftover one costs an emit a needless wake."""
    for start in range(0, len(waiters), 1000):
        chunk = [item.id for item in waiters[start : start + 1000]]
        try:
            await aq.delete_items(RESULTS_QUEUE, chunk)
        except Conflict:  # some deleted meanwhile: delete the others one by one
            for item_id in chunk:
                with contextlib.suppress(Conflict):
                    await aq.delete_items(RESULTS_QUEUE, [item_id])
