"""What an attempt's result leads to (pure code): the attempt record, the next
attempt or the dead letter, and what changes on the endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from querator.queue.models import Item
from querator.webhooks.delivery import Result
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.layout import (
    ATTEMPT_KIND,
    ATTEMPTS,
    DEAD,
    DELIVERIES,
    DELIVERY_KIND,
    Attempt,
    Delivery,
    Outcome,
    attempt_key,
    delivery_item,
)
from querator.webhooks.schedule import next_delay, parse_retry_after
from querator.webhooks.settings import WebhookSettings

__all__ = ["Decision", "dead_item", "decide"]

GONE = 410
PAUSING = (429, 503)
"""Statuses whose Retry-After sets the next attempt and pauses the endpoint."""
REASON_HEADER = "reason"


@dataclass(frozen=True, slots=True)
class Decision:
    """The consequences of one attempt."""

    outcome: Outcome
    record: Attempt
    produce: dict[str, list[Item]]
    """Items to produce with the delivery's completion (attempt record, next
    attempt or dead letter), in the same transaction."""
    delay: float | None = None
    """Seconds to the next attempt (outcome RETRYING)."""
    pause: float | None = None
    """The endpoint asked for no attempts for this many seconds (Retry-After)."""
    disable: str | None = None
    """Disable the endpoint, with this reason."""
    failing: bool | None = None
    """True: record that the endpoint started failing (unless it already was);
    False: it recovered; None: no change."""


def dead_item(delivery: Delivery, reason: str) -> Item:
    """The dead letter of ``delivery``: its payload, and why."""
    return Item(
        payload=delivery.model_dump_json().encode(),
        kind=DELIVERY_KIND,
        encoding="json",
        reference=delivery.endpoint_id,
        headers={REASON_HEADER: reason[:500]},
    )


def _why(result: Result) -> str:
    return f"HTTP {result.status_code}" if result.status_code is not None else result.error


def decide(
    settings: WebhookSettings,
    endpoint: Endpoint,
    delivery: Delivery,
    result: Result,
    now: datetime,
) -> Decision:
    """Classify ``result``: delivered (2xx), gone (410) or a refused target (the
    host resolved to a refused address): dead-letter and disable the endpoint,
    or failed (retry on the schedule, honouring Retry-After on 429
    and 503; dead-letter after the last attempt; disable the endpoint once it
    has failed for ``disable_after``)."""
    after = parse_retry_after(result.retry_after, now) if result.status_code in PAUSING else None
    delay = None
    disable = None
    if result.delivered:
        outcome = Outcome.DELIVERED
    elif result.status_code == GONE:
        outcome = Outcome.DEAD
        disable = "the endpoint answered 410 Gone"
    elif result.refused:
        outcome = Outcome.DEAD
        disable = f"its target was refused: {result.error}"
    else:
        delay = next_delay(settings, delivery.attempt, after)
        since = endpoint.failing_since
        limit = settings.disable_after
        if since is not None and limit is not None and (now - since).total_seconds() > limit:
            disable = f"every delivery failed since {since.isoformat(timespec='seconds')}"
            delay = None
        outcome = Outcome.RETRYING if delay is not None else Outcome.DEAD
    next_at = now + timedelta(seconds=delay) if delay is not None else None
    record = Attempt(
        message_id=delivery.message_id,
        endpoint_id=delivery.endpoint_id,
        seq=delivery.seq,
        attempt=delivery.attempt,
        at=now,
        status_code=result.status_code,
        latency_ms=round(result.latency * 1000, 3),
        response=result.response,
        error=result.error,
        outcome=outcome,
        next_at=next_at,
    )
    produce = {ATTEMPTS: [attempt_item(record)]}
    following = delivery.model_copy(
        update={"attempt": delivery.attempt + 1, "seq": delivery.seq + 1}
    )
    if outcome is Outcome.RETRYING:
        produce[DELIVERIES] = [delivery_item(following, next_at)]
    elif outcome is Outcome.DEAD:
        produce[DEAD] = [dead_item(following, disable or _why(result))]
    return Decision(
        outcome,
        record,
        produce,
        delay=delay,
        pause=after,
        disable=disable,
        failing=_failing(endpoint, result.delivered),
    )


def _failing(endpoint: Endpoint, delivered: bool) -> bool | None:
    if delivered:
        return False if endpoint.failing_since is not None else None
    return True if endpoint.failing_since is None else None


def attempt_item(record: Attempt) -> Item:
    """The attempts-log item of ``record`` (partitioned by endpoint)."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=ATTEMPT_KIND,
        encoding="json",
        reference=record.endpoint_id,
        dedup_key=attempt_key(record.message_id, record.endpoint_id, record.seq),
        partition_key=record.endpoint_id,
    )
