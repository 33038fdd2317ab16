"""Concurrency and rate limits of steps, checked when a worker takes a step
item and before its attempt runs (see :mod:`querator.limits.admission`)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from querator.errors import Conflict
from querator.limits.admission import Entry, Limited, Limits
from querator.limits.gate import PERMIT_HEADER, Gate, fallback_delay
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import transact_creating
from querator.workflows.functions import StepFunction
from querator.workflows.stored import StepPayload, step_item

log = logging.getLogger("querator.workflows")


async def enter(
    limits: Limits, leased: Leased, payload: StepPayload, step: StepFunction[..., Any]
) -> Entry | None:
    """Take what the step item ``leased`` needs to run now; None when it was parked."""
    if step.concurrency is None and step.rate_limit is None:
        return Entry()
    args, kwargs = step.codec.decode_args(payload.args)
    concurrency_key, rate_key = step.limit_keys(args, kwargs)
    limited = Limited(
        owner=step.name,
        concurrency=step.concurrency,
        rate_limit=step.rate_limit,
        concurrency_key=concurrency_key,
        rate_key=rate_key,
        parked_key=f"{payload.record_key()}/park",
        parked_before=payload.deferrals > 0,
    )

    async def park(semaphore: str, lease: float) -> None:
        await _park(limits.aq, limits.gate, semaphore, leased, payload, lease, limited.parked_key)

    return await limits.enter(leased, limited, park)


async def _park(
    aq: AsyncQueueClient,
    gate: Gate,
    semaphore: str,
    leased: Leased,
    payload: StepPayload,
    lease: float,
    parked_key: str,
) -> None:
    """Complete ``leased`` with a fallback copy due later, and park it."""
    later = payload.model_copy(
        update={
            "deferrals": payload.deferrals + 1,
            "prior_attempts": payload.prior_attempts + leased.attempts - 1,
        }
    )
    trace = {k: v for k, v in leased.headers.items() if k != PERMIT_HEADER}
    due = aq.clock.now() + timedelta(seconds=fallback_delay(lease, payload.deferrals))
    fallback = step_item(later, due, trace=trace)
    try:
        done = await transact_creating(aq, [leased], {leased.queue: [fallback]})
    except Conflict as exc:
        log.warning("run %s step %s: parking lost its lease: %s", payload.run_id, payload.step, exc)
        return
    [fallback_id] = done.produced[leased.queue]
    log.info(
        "run %s step %s@%d parked on %s", payload.run_id, payload.step, payload.position, semaphore
    )
    woken = step_item(later, None, trace=trace)
    await gate.park(semaphore, leased.queue, woken, fallback_id, parked_key)
