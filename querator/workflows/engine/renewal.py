"""Keeping the leases of running steps alive: one task renews all of a worker's.

A step that ends before its first renewal is due (most do) costs two set
operations here, not a task of its own.
"""

from __future__ import annotations

import logging
import math

import anyio

from querator.errors import Conflict, Unavailable
from querator.queue.models import Leased
from querator.queue.outage import Outage
from querator.queue.service import AsyncQueueClient

log = logging.getLogger("querator.workflows")

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
    """Renews each kept lease every ``period`` seconds by ``extend`` seconds, from
    :meth:`run` (one task, started by the worker) until :meth:`release`.

    A lease found lost (the item was re-leased or completed elsewhere) is
    dropped with a warning: the step goes on, and its commit is refused.
    """

    def __init__(self, aq: AsyncQueueClient) -> None:
        self._aq = aq
        self._kept: set[Kept] = set()
        self._changed = anyio.Event()
        self._next_due = math.inf
        self._outage = Outage(log, "lease renewals")

    def keep(self, leased: Leased, extend: float, period: float) -> Kept:
        """Start renewing ``leased``; the first renewal is due in ``period`` seconds."""
        kept = Kept(leased, extend, period, anyio.current_time() + period)
        self._kept.add(kept)
        if kept.due < self._next_due:
            self._changed.set()
        return kept

    def __contains__(self, kept: Kept) -> bool:
        """Whether ``kept`` is still renewed (not released, its lease not lost)."""
        return kept in self._kept

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
            for kept in [kept for kept in self._kept if kept.due <= now]:
                await self._renew(kept)
            self._next_due = min((kept.due for kept in self._kept), default=math.inf)
            self._changed = anyio.Event()
            with anyio.move_on_after(self._next_due - anyio.current_time()):
                await self._changed.wait()

    async def _renew(self, kept: Kept) -> None:
        kept.renewing = renewing = anyio.Event()
        current = kept.current
        try:
            with anyio.CancelScope(shield=True):
                [kept.current] = await self._aq.renew(current.queue, [current], extend=kept.extend)
            kept.due = anyio.current_time() + kept.period
            self._outage.back()
        except Conflict as exc:
            log.warning("step item %s lost its lease: %s", current.id, exc)
            self._kept.discard(kept)
        except Unavailable as exc:
            self._outage.lost(exc)  # once per outage, not a traceback per renewal
            kept.due = anyio.current_time() + min(kept.period, RETRY_AFTER)
        except Exception:
            log.exception("step item %s: renewal failed; trying again", current.id)
            kept.due = anyio.current_time() + min(kept.period, RETRY_AFTER)
        finally:
            kept.renewing = None
            renewing.set()
