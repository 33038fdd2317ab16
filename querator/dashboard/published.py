"""What a run published and was sent, for its page: the latest value of each
event key (``set_event``), the values of its streams (``write_stream``) and the
messages sent to it (``send``), read or unread.

Each is one key-range scan of the results queue (``{run}/event/``,
``{run}/stream/``, ``{run}/msg/``), at most :data:`SHOWN` items each: a
page of a run that published a million values reads no more than that. A
message is read once a ``recv`` record of the run names it (see
:mod:`querator.workflows.engine.mailbox`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ValidationError

from querator.errors import QueueNotFound
from querator.queue.ids import parse_id
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.inspection import RunInfo
from querator.workflows.keys import RECV_STEP, RESULTS_QUEUE
from querator.workflows.stored import StepRecord

__all__ = ["SHOWN", "Message", "Published", "StreamValues", "published"]

SHOWN = 200
"""Items of each kind (event values, stream values, messages) read for a page."""


@dataclass
class StreamValues:
    """A stream's values as stored (JSON text), in stream order."""

    key: str
    values: list[str] = field(default_factory=list)
    closed: bool = False


@dataclass
class Message:
    """A message sent to the run."""

    topic: str
    value: str
    """Its value as JSON text."""
    read: bool
    """True once a ``recv`` of the run took it."""


@dataclass
class Published:
    """What a run published and was sent (each kind cut at :data:`SHOWN` items)."""

    events: dict[str, str]
    """The latest value (JSON text) of each event key, by key."""
    streams: list[StreamValues]
    messages: list[Message]
    cut: bool
    """True when some kind had more than :data:`SHOWN` items (the rest not shown)."""


def _split(key: str | None, prefix: str) -> tuple[str, str]:
    """(name, rest) of an item key under ``prefix``: ``{prefix}{name}/{rest}``."""
    name, _, rest = (key or "")[len(prefix) :].partition("/")
    return name, rest


def _record(item: StoredItem) -> StepRecord | None:
    try:
        return StepRecord.model_validate_json(item.payload)
    except ValidationError:
        return None


def _read_keys(run: RunInfo) -> set[str]:
    """The keys of the messages the run's ``recv`` calls took."""
    read = set()
    for step in run.steps:
        if step.step == RECV_STEP and step.result:
            try:
                key = json.loads(step.result).get("message")
            except (ValueError, AttributeError):
                continue
            if isinstance(key, str):
                read.add(key)
    return read


def _sent_order(item: StoredItem) -> tuple[int, int]:
    """Messages in the order they were sent (their ids' sequence numbers)."""
    address = parse_id(item.id)
    return (address.partition, address.seq) if address is not None else (0, 0)


async def _scan(aq: AsyncQueueClient, prefix: str) -> tuple[list[StoredItem], bool]:
    try:
        found = await aq.scan_keys(RESULTS_QUEUE, prefix, limit=SHOWN + 1)
    except QueueNotFound:
        return [], False
    return found[:SHOWN], len(found) > SHOWN


async def published(aq: AsyncQueueClient, run: RunInfo) -> Published:
    """What ``run`` published (events, streams) and was sent (messages)."""
    run_id = run.run_id
    events: dict[str, str] = {}
    prefix = f"{run_id}/event/"
    found, cut_events = await _scan(aq, prefix)
    for item in found:  # key order: the latest value of a key comes last
        record = _record(item)
        if record is not None:
            events[_split(item.dedup_key, prefix)[0]] = record.result or "null"
    streams: dict[str, StreamValues] = {}
    prefix = f"{run_id}/stream/"
    found, cut_streams = await _scan(aq, prefix)
    for item in found:
        name = _split(item.dedup_key, prefix)[0]
        stream = streams.setdefault(name, StreamValues(name))
        record = _record(item)
        if record is None:
            continue
        if record.result is None:
            stream.closed = True
        else:
            stream.values.append(record.result)
    read = _read_keys(run)
    prefix = f"{run_id}/msg/"
    found, cut_messages = await _scan(aq, prefix)
    messages = [
        Message(
            _split(item.dedup_key, prefix)[0],
            item.payload.decode("utf-8", "replace"),
            item.dedup_key in read,
        )
        for item in sorted(found, key=_sent_order)
    ]
    return Published(
        events, list(streams.values()), messages, cut_events or cut_streams or cut_messages
    )
