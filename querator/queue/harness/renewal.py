"""Keeping leases alive: one task renews every lease a service holds.

Each kept lease is renewed every ``period`` seconds by ``extend`` seconds;
when one is due, those due within the next :data:`EARLY` of their period
come along, all renewed in one call per queue and ``extend`` (one by one
only when that call fails, to find which lease was lost). A lease that ends
before its first renewal is due (most do) costs two set operations here, not
a task of its own.
"""

from __future__ import annotations

import logging
import math
from itertools import groupby

import anyio

from querator.errors import Conflict, Unavailable
from querator.queue.models import Leased
from querator.queue.outage import Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH

__all__ = ["EARLY", "RETRY_AFTER", "Kept", "Renewer"]

EARLY = 0.25
"""A lease whose renewal is due within this fraction of its period rides along
with one due now: leases taken at about the same time share one call."""
RETRY_AFTER = 1.0
"""Seconds before a renewal that failed for another reason than a lost lease
(the store unreachable, say) is tried again."""


class Kept:
    """One lease a :class:`Renewer` keeps alive; ``current`` is its latest version."""

    __slots__ = ("current", "due", "extend", "period", "renewing")

    def __init__(self, leased: Leased, extend: float, period: float, due: float) -> None:
        self.current = leased
        self.extend = extend
        self.period = period
        self.due = due
        """When the next renewal is due (``anyio.current_time()`` clock)."""
        self.renewing: anyio.Event | None = None
        """Set while a renewal is in flight."""


class Renewer:
    """Renews the kept leases from :meth:`run` (one task, started by the
    service) until each one's :meth:`release`.

    A lease found lost (the item was re-leased or completed elsewhere) is
    dropped with a warning (``what``: what its items are, for the log): its
    holder goes on, and its commit is refused.
    """

    def __init__(self, aq: AsyncQueueClient, log: logging.Logger, what: str = "step item") -> None:
        self._aq = aq
        self._log = log
        self._what = what
        self._kept: set[Kept] = set()
        self._changed: anyio.Event | None = None
        self._next_due = math.inf
        self._outage = Outage(log, "lease renewals")

    def keep(self, leased: Leased, extend: float, period: float) -> Kept:
        """Start renewing ``leased``; the first renewal is due in ``period`` seconds."""
        kept = Kept(leased, extend, period, anyio.current_time() + period)
        self._kept.add(kept)
        if kept.due < self._next_due and self._changed is not None:
            self._changed.set()
        return kept

    def __contains__(self, kept: Kept) -> bool:
        """Whether ``kept`` is still renewed (not released, its lease not lost)."""
        return kept in self._kept

    def __len__(self) -> int:
        """The leases kept alive now."""
        return len(self._kept)

    def discard(self, kept: Kept) -> None:
        """Stop renewing ``kept`` now (its holder is done with it, whatever happened)."""
        self._kept.discard(kept)

    async def release(self, kept: Kept) -> Leased:
        """Stop renewing; the lease's latest version (once a renewal in flight ended)."""
        self._kept.discard(kept)
        if kept.renewing is not None:
            await kept.renewing.wait()
        return kept.current

    async def run(self) -> None:
        """Renew what is due, then sleep until the next is due (or one is kept)."""
        while True:
            now = anyio.current_time()
            soon = [kept for kept in self._kept if kept.due - kept.period * EARLY <= now]
            due = sorted(soon, key=_group)
            for _, same in groupby(due, key=_group):
                batch = list(same)
                for start in range(0, len(batch), MAX_BATCH):
                    await self._renew(batch[start : start + MAX_BATCH])
            self._next_due = min((kept.due for kept in self._kept), default=math.inf)
            self._changed = anyio.Event()
            with anyio.move_on_after(self._next_due - anyio.current_time()):
                await self._changed.wait()

    async def _renew(self, batch: list[Kept]) -> None:
        """Renew ``batch`` (one queue, one ``extend``) in one call; one by one if
        that call found a lost lease (to drop that one only)."""
        if not await self._renew_batch(batch) and len(batch) > 1:
            for kept in batch:
                if kept in self._kept:
                    await self._renew_batch([kept])

    async def _renew_batch(self, batch: list[Kept]) -> bool:
        """False when a lease of ``batch`` was lost (dropped if ``batch`` is that one)."""
        renewing = anyio.Event()
        for kept in batch:
            kept.renewing = renewing
        first = batch[0].current
        try:
            with anyio.CancelScope(shield=True):
                renewed = await self._aq.renew(
                    first.queue, [kept.current for kept in batch], extend=batch[0].extend
                )
            by_id = {leased.id: leased for leased in renewed}
            for kept in batch:
                kept.current = by_id.get(kept.current.id, kept.current)
                kept.due = anyio.current_time() + kept.period
            self._outage.back()
        except Conflict as exc:
            if len(batch) > 1:
                return False
            self._log.warning("%s %s lost its lease: %s", self._what, first.id, exc)
            self._kept.discard(batch[0])
        except Unavailable as exc:
            self._outage.lost(exc)  # once per outage, not a traceback per renewal
            self._later(batch)
        except Exception:
            self._log.exception("%s %s: renewal failed; trying again", self._what, first.id)
            self._later(batch)
        finally:
            for kept in batch:
                kept.renewing = None
            renewing.set()
        return True

    def _later(self, batch: list[Kept]) -> None:
        for kept in batch:
            kept.due = anyio.current_time() + min(kept.period, RETRY_AFTER)


def _group(kept: Kept) -> tuple[str, float]:
    return kept.current.queue, kept.extend
