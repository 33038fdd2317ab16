"""A run's mailbox: the messages sent to it, and finding the oldest unread one.

A message is a results-queue item under ``{run}/msg/{topic}/{id}`` (``id``: a
fresh uuid, or a digest of the sender's idempotency key, so a resend dedups),
in the run's partition, so its id's sequence number orders it after every
message sent before it. Nothing deletes a message when it is read (the sweep
prunes the messages of ended runs: :mod:`querator.workflows.retention`): ``recv``
stores, at its position in the run's history, the message's key and value, and
a message is *read* when some ``recv`` record of the run names it. Reading and
recording are therefore one write (the record), made in the transaction that
completes the item in hand, fenced by its lease. Each send also writes the
run's mailbox mark (``mailboxes/{run}``, once: its key dedups), by which the
maintenance sweep finds the messages of ended runs to prune
(:func:`~querator.workflows.retention.prune_messages_async`).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from querator.queue.ids import parse_id
from querator.queue.models import Item, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import NAME_PATTERN
from querator.workflows.keys import (
    ENCODING,
    RECORD_KIND,
    RECV_STEP,
    RESULTS_QUEUE,
    mailbox_mark_key,
)
from querator.workflows.stored import StepRecord

__all__ = [
    "MESSAGE_KIND",
    "consumed",
    "mailbox_mark",
    "mailbox_prefix",
    "message_item",
    "message_prefix",
    "oldest_unread",
    "recv_record",
    "recv_value",
    "sent_wake",
    "sent_wake_of",
]

MESSAGE_KIND = "querator.message"
"""The kind of a message item in the results queue."""


def mailbox_prefix(run_id: str) -> str:
    """The key prefix of every message to ``run_id`` (any topic)."""
    return f"{run_id}/msg/"


def message_prefix(run_id: str, topic: str) -> str:
    """The key prefix of the messages to ``run_id`` on ``topic``."""
    return f"{mailbox_prefix(run_id)}{topic}/"


def message_item(run_id: str, topic: str, text: str, idempotency_key: str | None) -> Item:
    """The item holding a message (``text``: its value as JSON)."""
    if idempotency_key is None:
        tag = uuid.uuid4().hex
    else:
        tag = "k" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return Item(
        payload=text.encode(),
        kind=MESSAGE_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=message_prefix(run_id, topic) + tag,
        partition_key=run_id,
    )


SENT_WAKE = "querator.sent."
"""The prefix of the wakeup a send's commit carries besides its wake task's
queue: ``{SENT_WAKE}{run}.{tag}``, the run and its wake task's tag, so that a
worker keeping the run's body parked on ``recv`` looks up what it will read
while the wake task is being leased (:meth:`~.driver.Engine.sent`)."""
_WAKE_NAME = re.compile(NAME_PATTERN)


def sent_wake(run_id: str, tag: str) -> list[str]:
    """The wakeup of a send to ``run_id`` whose wake task has ``tag`` (none for a
    run id that cannot be part of a wakeup's name)."""
    name = f"{SENT_WAKE}{run_id}.{tag}"
    return [name] if _WAKE_NAME.fullmatch(name) else []


def sent_wake_of(name: str) -> tuple[str, str] | None:
    """(run id, dedup key of its wake task) a :func:`sent_wake` names, else None."""
    if not name.startswith(SENT_WAKE):
        return None
    run_id, _, tag = name[len(SENT_WAKE) :].rpartition(".")
    return (run_id, f"{run_id}/wake/{tag}") if run_id and tag else None


def mailbox_mark(run_id: str) -> Item:
    """The mark saying ``run_id`` has messages (produced with each message:
    the first one writes it, the others find it there)."""
    return Item(
        payload=b"",
        kind=RECORD_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=mailbox_mark_key(run_id),
    )


def recv_record(key: str | None, text: str | None) -> StepRecord:
    """The record of a ``recv``: the message read (its key and value as JSON
    text), or neither (the timeout came first)."""
    result = json.dumps({"message": key, "value": text})
    return StepRecord(step=RECV_STEP, ok=True, result=result, attempts=1)


def recv_value(record: StepRecord) -> tuple[str | None, Any]:
    """(key, value) of a ``recv`` record; (None, None) for a timeout."""
    stored = json.loads(record.result or "{}")
    text = stored.get("value")
    return stored.get("message"), (None if text is None else json.loads(text))


def consumed(records: Mapping[int, StepRecord]) -> set[str]:
    """The keys of the messages the run's ``recv`` records name (read)."""
    return {
        key
        for record in records.values()
        if record.step == RECV_STEP and (key := recv_value(record)[0]) is not None
    }


def _order(item: StoredItem) -> tuple[int, int]:
    address = parse_id(item.id)
    return (address.partition, address.seq) if address is not None else (0, 0)


async def oldest_unread(
    aq: AsyncQueueClient, run_id: str, topic: str, read: set[str]
) -> StoredItem | None:
    """The oldest message to ``run_id`` on ``topic`` not in ``read``, if any."""
    prefix = message_prefix(run_id, topic)
    unread: list[StoredItem] = []
    after: str | None = None
    while True:
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=after, limit=1000)
        unread += [item for item in page if item.dedup_key not in read]
        if len(page) < 1000:
            break
        after = page[-1].dedup_key
    return min(unread, key=_order, default=None)
