"""``send``: store a message and fan it out, one delivery item per matching endpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from querator.errors import InvalidArgument
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH
from querator.webhooks.endpoints import check_event_type, matches
from querator.webhooks.errors import MessageNotFound, PayloadTooLarge
from querator.webhooks.layout import (
    DELIVERIES,
    MESSAGE_KIND,
    MESSAGES,
    Delivery,
    Message,
    delivery_item,
    delivery_key,
    message_id,
    message_key,
)
from querator.webhooks.registry import list_all
from querator.webhooks.settings import WebhookSettings

__all__ = ["encode_payload", "get_message", "prepare", "send"]

MAX_KEY = 256


def _check_key(field: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY or "\x00" in value:
        raise InvalidArgument(field, f"must be a string of 1 to {MAX_KEY} characters, no NUL")
    return value


def encode_payload(payload: Any, limit: int) -> str:
    """The JSON text of ``payload`` (compact, UTF-8); InvalidArgument if it is
    not JSON-serialisable, :class:`PayloadTooLarge` over ``limit`` bytes."""
    try:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("payload", f"must be JSON-serialisable: {exc}") from None
    size = len(text.encode())
    if size > limit:
        raise PayloadTooLarge(size, limit)
    return text


def first_delivery(message: Message, endpoint_id: str) -> Item:
    """The first delivery item of ``message`` to ``endpoint_id`` (deduplicated)."""
    delivery = Delivery(
        message_id=message.id,
        endpoint_id=endpoint_id,
        event_type=message.event_type,
        body=message.payload,
        ordering_key=message.ordering_key,
    )
    return delivery_item(delivery).model_copy(
        update={"dedup_key": delivery_key(message.id, endpoint_id)}
    )


async def find_message(aq: AsyncQueueClient, msg_id: str) -> Message | None:
    """The stored message ``msg_id``, or None."""
    found = await aq.lookup(MESSAGES, [message_key(msg_id)])
    item = found.get(message_key(msg_id))
    return None if item is None else Message.model_validate_json(item.payload)


async def get_message(aq: AsyncQueueClient, msg_id: str) -> Message:
    """The stored message ``msg_id``; :class:`MessageNotFound` if there is none."""
    if not isinstance(msg_id, str) or not 1 <= len(msg_id) <= MAX_KEY:
        raise MessageNotFound(str(msg_id))
    message = await find_message(aq, msg_id)
    if message is None:
        raise MessageNotFound(msg_id)
    return message


def prepare(
    settings: WebhookSettings,
    event_type: str,
    payload: Any,
    idempotency_key: str | None,
    ordering_key: str | None,
) -> Message:
    """The message to send, every argument checked (nothing is stored yet)."""
    try:
        check_event_type(event_type)
    except ValueError as exc:
        raise InvalidArgument("event_type", str(exc)) from None
    return Message(
        id=message_id(_check_key("idempotency_key", idempotency_key)),
        event_type=event_type,
        payload=encode_payload(payload, settings.max_payload_bytes),
        idempotency_key=idempotency_key,
        ordering_key=_check_key("ordering_key", ordering_key),
        created_at=datetime.now(UTC),
    )


async def send(aq: AsyncQueueClient, prepared: Message) -> Message:
    """Store the message and produce its deliveries; see :meth:`Webhooks.send`."""
    msg_id, event_type = prepared.id, prepared.event_type
    idempotency_key = prepared.idempotency_key
    if idempotency_key is not None and (known := await find_message(aq, msg_id)) is not None:
        return known
    targets = [
        e.id for e in await list_all(aq) if not e.disabled and matches(e.event_types, event_type)
    ]
    message = prepared.model_copy(update={"endpoints": tuple(targets)})
    items = [first_delivery(message, endpoint_id) for endpoint_id in targets]
    record = Item(
        payload=message.model_dump_json().encode(),
        kind=MESSAGE_KIND,
        encoding="json",
        reference=event_type,
        dedup_key=message_key(msg_id),
    )
    chunk = MAX_BATCH - 1
    # The message record goes with the last chunk: a send that failed half-way
    # leaves no message, so sending it again (same key) fans out again, and the
    # deliveries' dedup keys keep the ones already produced from doubling.
    while len(items) > chunk:
        await aq.produce(DELIVERIES, items[:chunk])
        items = items[chunk:]
    produce = {MESSAGES: [record], **({DELIVERIES: items} if items else {})}
    key = message_key(msg_id)
    done = await aq.commit(produce=produce, silent=[MESSAGES], lookup={MESSAGES: [key]})
    stored = done.found.get(MESSAGES, {}).get(key)
    return message if stored is None else Message.model_validate_json(stored.payload)
