"""Where webhook state lives: the internal queues, their keys, and the records.

```
querator.webhooks.endpoints   endpoint records (two slots each, never leased)
querator.webhooks.messages    one record per message (dedup key: its id), kept for retention
querator.webhooks.deliveries  one leased item per (message, endpoint) attempt
querator.webhooks.dead        deliveries that used their last attempt (re-drivable)
querator.webhooks.attempts    one record per attempt, partitioned by endpoint, kept for retention
```
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from querator.queue.models import Item, QueueSettings
from querator.queue.record_store import RecordStore
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.settings import MAX_DELAY, WebhookSettings

__all__ = ["Attempt", "Delivery", "Message", "Outcome"]

ENDPOINTS = "querator.webhooks.endpoints"
MESSAGES = "querator.webhooks.messages"
DELIVERIES = "querator.webhooks.deliveries"
DEAD = "querator.webhooks.dead"
ATTEMPTS = "querator.webhooks.attempts"
ATTEMPT_PARTITIONS = 16
"""Attempt records are partitioned by endpoint: listing one endpoint's reads one partition."""
DELIVERY_KIND = "querator.webhook.delivery"
MESSAGE_KIND = "querator.webhook.message"
ATTEMPT_KIND = "querator.webhook.attempt"

ENDPOINTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
ENDPOINT_SLOTS = RecordStore(
    ENDPOINTS, Endpoint, kind="querator.endpoint", prefix="endpoint/", settings=ENDPOINTS_SETTINGS
)
"""The endpoints' records, named by endpoint id (:mod:`querator.queue.record_store`)."""


class Kept(BaseModel):
    """A stored record: frozen, and unknown fields ignored (rolling deploys)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Message(Kept):
    """A sent message: what ``send`` returns and the messages queue keeps."""

    id: str
    """Also the ``webhook-id`` of every attempt: receivers deduplicate by it."""
    event_type: str
    payload: str
    """The JSON body, exactly as sent and signed."""
    idempotency_key: str | None = None
    ordering_key: str | None = None
    created_at: datetime
    endpoints: tuple[str, ...] = ()
    """The endpoints it was fanned out to."""


class Delivery(Kept):
    """The payload of a delivery item: everything one attempt needs."""

    message_id: str
    endpoint_id: str
    event_type: str
    body: str
    attempt: int = 0
    """0-based attempt within the current schedule (reset by a re-drive)."""
    seq: int = 0
    """Attempts recorded so far for this (message, endpoint), re-drives included."""
    ordering_key: str | None = None


class Outcome(StrEnum):
    """What an attempt led to."""

    DELIVERED = "delivered"
    RETRYING = "retrying"
    DEAD = "dead"
    """Its last attempt, or the endpoint answered 410 or is disabled: dead-lettered."""


class Attempt(Kept):
    """One attempt, as the attempts log keeps it."""

    message_id: str
    endpoint_id: str
    seq: int
    """0-based number of this attempt for its (message, endpoint), re-drives included."""
    attempt: int
    """0-based attempt within the retry schedule."""
    at: datetime
    status_code: int | None = None
    latency_ms: float
    response: str = ""
    """The first ``response_excerpt`` bytes of the answer's body."""
    error: str = ""
    outcome: Outcome
    next_at: datetime | None = None
    """When the next attempt is due (outcome ``retrying``)."""


def delivery_item(delivery: Delivery, enqueue_at: datetime | None = None) -> Item:
    """The item of ``delivery`` (a first attempt, a retry, a re-drive), due at ``enqueue_at``."""
    return Item(
        payload=delivery.model_dump_json().encode(),
        kind=DELIVERY_KIND,
        encoding="json",
        reference=delivery.endpoint_id,
        enqueue_at=enqueue_at,
    )


def message_id(idempotency_key: str | None) -> str:
    """The message id: derived from the idempotency key, so the same key names
    the same message in every process; random without one."""
    if idempotency_key is None:
        return "msg_" + secrets.token_hex(16)
    return "msg_" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def message_key(msg_id: str) -> str:
    return f"message/{msg_id}"


def delivery_key(msg_id: str, endpoint_id: str) -> str:
    return f"delivery/{msg_id}/{endpoint_id}"


def attempt_key(msg_id: str, endpoint_id: str, seq: int) -> str:
    return f"attempt/{msg_id}/{endpoint_id}/{seq}"


def redrive_key(dead_id: str) -> str:
    return f"redrive/{dead_id}"


def queue_settings(settings: WebhookSettings) -> dict[str, QueueSettings]:
    """Every webhook queue and its settings (dead queue first: others name it)."""
    kept = QueueSettings(
        lease_timeout=min(60.0, settings.retention), expire_timeout=settings.retention
    )
    return {
        DEAD: kept,
        ENDPOINTS: ENDPOINTS_SETTINGS,
        MESSAGES: kept,
        ATTEMPTS: kept.model_copy(update={"partitions": ATTEMPT_PARTITIONS}),
        DELIVERIES: QueueSettings(
            lease_timeout=settings.lease_timeout,
            expire_timeout=MAX_DELAY + 86_400.0,
            dead_queue=DEAD,
        ),
    }


async def ensure_queues(aq: AsyncQueueClient, settings: WebhookSettings) -> None:
    """Create the webhook queues that are missing."""
    for name, wanted in queue_settings(settings).items():
        await aq.create_queue(name, wanted, exist_ok=True)
