"""Concurrency and rate limits of steps, checked when a worker takes a step
item and before its attempt runs (see :mod:`querator.limits.gate`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from querator.errors import Conflict
from querator.limits.gate import PERMIT_HEADER, RECHECK, Gate, Permit
from querator.limits.rate import AsyncRateLimiter
from querator.queue.harness import Kept, Renewer
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import transact_creating
from querator.workflows.functions import StepFunction
from querator.workflows.stored import StepPayload, step_item

log = logging.getLogger("querator.workflows")


@dataclass(slots=True)
class Entry:
    """What an item may do: run (holding ``permit``, if its step has a
    concurrency limit), or wait ``defer`` seconds for its rate limit."""

    permit: Permit | None = None
    kept: Kept | None = None
    defer: float | None = None


PARKED = None
"""What :meth:`Limits.enter` returns for an item it parked."""


class Limits:
    """One worker's view of its steps' limits."""

    def __init__(self, aq: AsyncQueueClient, renewer: Renewer, client_id: str) -> None:
        self.aq = aq
        self.renewer = renewer
        self.gate = Gate(aq, client_id)
        self._rates: dict[str, AsyncRateLimiter] = {}
        self._client_id = client_id

    async def enter(
        self, leased: Leased, payload: StepPayload, step: StepFunction[..., Any]
    ) -> Entry | None:
        """Take what ``leased`` needs to run now; None when it was parked."""
        if step.concurrency is None and step.rate_limit is None:
            return Entry()
        args, kwargs = step.codec.decode_args(payload.args)
        concurrency_key, rate_key = step.limit_keys(args, kwargs)
        entry = Entry()
        spec = step.concurrency
        if spec is not None:
            semaphore = spec.semaphore(step.name, concurrency_key)
            await self.gate.ensure(semaphore, spec)
            parked = _record_key(payload) if payload.deferrals else None
            entry.permit = await self.gate.take(semaphore, leased, parked)
            if entry.permit is None:
                await self._park(semaphore, leased, payload, spec.lease)
                return PARKED
            entry.kept = self.renewer.keep(entry.permit.leased, spec.lease, spec.lease / 3)
        if step.rate_limit is not None:
            limiter = self._rates.get(step.rate_limit.name)
            if limiter is None or limiter.limit is not step.rate_limit:
                limiter = AsyncRateLimiter(self.aq, step.rate_limit, client_id=self._client_id)
                self._rates[step.rate_limit.name] = limiter
            decision = await limiter.try_acquire(rate_key)
            if not decision.allowed:
                await self.leave(entry)
                return Entry(defer=max(decision.retry_after, 0.001))
        return entry

    async def leave(self, entry: Entry) -> None:
        """Hand the entry's permit over (or free it)."""
        if entry.permit is None:
            return
        if entry.kept is not None:
            entry.permit.leased = await self.renewer.release(entry.kept)
            entry.kept = None
        await self.gate.release(entry.permit)
        entry.permit = None

    async def _park(
        self, semaphore: str, leased: Leased, payload: StepPayload, lease: float
    ) -> None:
        """Complete ``leased`` with a fallback copy due later, and park it."""
        later = payload.model_copy(
            update={
                "deferrals": payload.deferrals + 1,
                "prior_attempts": payload.prior_attempts + leased.attempts - 1,
            }
        )
        at = self.aq.clock.now() + timedelta(seconds=RECHECK * lease)
        fallback = step_item(later, at, trace=_trace(leased))
        try:
            done = await transact_creating(self.aq, [leased], {leased.queue: [fallback]})
        except Conflict as exc:
            log.warning(
                "run %s step %s: parking lost its lease: %s", payload.run_id, payload.step, exc
            )
            return
        [fallback_id] = done.produced[leased.queue]
        log.info(
            "run %s step %s@%d parked on %s",
            payload.run_id,
            payload.step,
            payload.position,
            semaphore,
        )
        woken = step_item(later, None, trace=_trace(leased))
        await self.gate.park(semaphore, leased.queue, woken, fallback_id, _record_key(payload))


def _record_key(payload: StepPayload) -> str:
    """The dedup key of the parked record of ``payload``'s step call."""
    return f"{payload.record_key()}/park"


def _trace(leased: Leased) -> dict[str, str]:
    return {k: v for k, v in leased.headers.items() if k != PERMIT_HEADER}
