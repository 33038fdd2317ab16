"""Parking a task item that found no permit of its concurrency limit (see
:mod:`querator.limits.gate`): the item is completed with a fallback copy due
later, and a parked record holds the copy to start when a holder hands a
permit over."""

from __future__ import annotations

import logging
from datetime import timedelta

from querator.errors import Conflict
from querator.limits.admission import Limited
from querator.limits.gate import PERMIT_HEADER, Gate, fallback_delay
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.tasks.layout import PRIOR_HEADER, prior_attempts

log = logging.getLogger("querator.tasks")

PARKS_HEADER = "querator-task-parks"
"""Header of a parked task's copies: how many times the call was parked."""


async def park(
    aq: AsyncQueueClient, gate: Gate, semaphore: str, leased: Leased, lease: float, limited: Limited
) -> None:
    """Complete ``leased`` with its fallback copy, and park the copy to wake."""
    headers = {k: v for k, v in leased.headers.items() if k != PERMIT_HEADER}
    parks = leased.headers.get(PARKS_HEADER, "0")
    parked_before = int(parks) if parks.isdigit() else 0
    headers[PARKS_HEADER] = str(parked_before + 1)
    headers[PRIOR_HEADER] = str(prior_attempts(leased.headers) + leased.attempts - 1)

    def copy(delay: float | None) -> Item:
        at = aq.clock.now() + timedelta(seconds=delay) if delay is not None else None
        return Item(
            payload=leased.payload,
            kind=leased.kind,
            encoding=leased.encoding,
            reference=leased.reference,
            headers=headers,
            enqueue_at=at,
            priority=leased.priority,
        )

    try:
        done = await aq.transact(
            complete=[leased], produce={leased.queue: [copy(fallback_delay(lease, parked_before))]}
        )
    except Conflict as exc:
        log.warning("task %s %s: parking lost its lease: %s", leased.kind, leased.reference, exc)
        return
    [fallback_id] = done.produced[leased.queue]
    log.info("task %s %s parked on %s", leased.kind, leased.reference, semaphore)
    await gate.park(semaphore, leased.queue, copy(None), fallback_id, limited.parked_key)
