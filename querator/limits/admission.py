"""Admitting one leased item under its function's limits, for a worker: take a
permit of its concurrency limit (or park it), then count a start of its rate
limit (or defer it). Used by the workflow engine (steps) and the task runner
(tasks); each brings how its items are parked."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from querator.errors import QueratorError
from querator.limits.concurrency import Concurrency
from querator.limits.gate import Gate, Permit
from querator.limits.rate import AsyncRateLimiter, RateLimit
from querator.queue.harness import Kept, Renewer
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient

log = logging.getLogger("querator.limits")

LEAVE_WITHIN = 5.0
"""Seconds a holder that is being cancelled still tries to hand its permit over."""
Park = Callable[[str, float], Awaitable[None]]
"""Parks the item on a semaphore (its name, and the limit's lease)."""


@dataclass(slots=True)
class Entry:
    """What an item may do: run (holding ``permit``, if its function has a
    concurrency limit), or wait ``defer`` seconds for its rate limit."""

    permit: Permit | None = None
    kept: Kept | None = None
    defer: float | None = None


@dataclass(frozen=True, slots=True)
class Limited:
    """One item's limits and keys."""

    owner: str
    """The limited function's persisted name."""
    concurrency: Concurrency | None
    rate_limit: RateLimit | None
    concurrency_key: str
    rate_key: str
    parked_key: str
    """The dedup key of the parked record the item leaves."""
    parked_before: bool
    """Whether the item may have left a parked record (it was parked or deferred)."""


class Limits:
    """One worker's permits and rate limiters."""

    def __init__(self, aq: AsyncQueueClient, renewer: Renewer, client_id: str) -> None:
        self.aq = aq
        self.renewer = renewer
        self.gate = Gate(aq, client_id)
        self._rates: dict[str, AsyncRateLimiter] = {}
        self._client_id = client_id

    async def enter(self, leased: Leased, limited: Limited, park: Park) -> Entry | None:
        """Take what ``leased`` needs to run now; None when ``park`` parked it."""
        entry = Entry()
        spec = limited.concurrency
        if spec is not None:
            semaphore = spec.semaphore(limited.owner, limited.concurrency_key)
            await self.gate.ensure(semaphore, spec)
            parked = limited.parked_key if limited.parked_before else None
            entry.permit = await self.gate.take(semaphore, leased, parked)
            if entry.permit is None:
                await park(semaphore, spec.lease)
                return None
            entry.kept = self.renewer.keep(entry.permit.leased, spec.lease, spec.lease / 3)
        rate = limited.rate_limit
        if rate is not None:
            limiter = self._rates.get(rate.name)
            if limiter is None or limiter.limit is not rate:
                limiter = AsyncRateLimiter(self.aq, rate, client_id=self._client_id)
                self._rates[rate.name] = limiter
            decision = await limiter.try_acquire(limited.rate_key)
            if not decision.allowed:
                await self.leave(entry)
                return Entry(defer=max(decision.retry_after, 0.001))
        return entry

    async def leave(self, entry: Entry) -> None:
        """Hand the entry's permit over (or free it), even when the worker is
        being cancelled (shielded, for at most :data:`LEAVE_WITHIN` seconds:
        past that the permit comes back when its lease runs out)."""
        if entry.permit is None:
            return
        permit, kept = entry.permit, entry.kept
        entry.permit = entry.kept = None
        with anyio.move_on_after(LEAVE_WITHIN, shield=True):
            try:
                if kept is not None:
                    permit.leased = await self.renewer.release(kept)
                await self.gate.release(permit)
            except QueratorError as exc:  # the store is away: the lease frees it
                log.warning("permit of %s not handed over: %s", permit.semaphore, exc)
