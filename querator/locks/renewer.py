"""Keeping held permits alive: one task per client renews all of its permits,
in batches (for a library client, one atomic ``transact`` of every permit due
within half a period; for an HTTP client, one ``locks.renew`` call each).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from typing import Any

import anyio

from querator.errors import Conflict, Unavailable
from querator.locks.permit import Permit
from querator.locks.sources import PermitSource
from querator.queue.outage import Outage
from querator.queue.validation import MAX_BATCH

log = logging.getLogger("querator.locks")

RETRY_AFTER = 0.5
"""Seconds before a renewal that failed for another reason than a lost lease
(the store unreachable) is tried again."""

_RENEWERS: weakref.WeakKeyDictionary[PermitSource, PermitRenewer] = weakref.WeakKeyDictionary()


def renewer_of(source: PermitSource) -> PermitRenewer:
    """The renewer of ``source``'s permits, started on first use (on its client's loop)."""
    renewer = _RENEWERS.get(source)
    if renewer is None:
        renewer = _RENEWERS[source] = PermitRenewer(source)
    if not renewer.running:  # first use, or the client was closed and opened again
        source.run_in_background(renewer.run)
        renewer.running = True
    return renewer


class PermitRenewer:
    """Renews each held permit a third of its lease after the last renewal,
    until it is dropped; marks a permit lost when the source refuses it."""

    def __init__(self, source: PermitSource) -> None:
        self._source = weakref.ref(source)  # strong, it would keep its client alive
        self._held: set[Permit] = set()
        self._pending: set[Permit] = set()
        self._changed = anyio.Event()
        self._busy = anyio.Lock()
        self._outage = Outage(log, "lock renewals")
        self.running = False
        """True while :meth:`run` runs (as a background task of the client)."""

    def keep(self, permit: Permit) -> None:
        """Start renewing ``permit``."""
        self._held.add(permit)
        self._changed.set()

    async def drop(self, permit: Permit) -> None:
        """Stop renewing ``permit``, once a renewal in flight has ended."""
        self._held.discard(permit)
        async with self._busy:
            pass

    async def run(self) -> None:
        """Renew what is due (with what is nearly due), then sleep until the next."""
        try:
            await self._serve()
        finally:
            self.running = False

    async def _serve(self) -> None:
        while True:
            now = time.monotonic()
            due = [p for p in self._held if p._due - p._lease / 6 <= now]
            for start in range(0, len(due), MAX_BATCH):
                await self._renew(due[start : start + MAX_BATCH])
            next_due = min((p._due for p in self._held), default=math.inf)
            self._changed = anyio.Event()
            with anyio.move_on_after(next_due - time.monotonic()):
                await self._changed.wait()

    async def _renew(self, batch: list[Permit]) -> None:
        async with self._busy:
            with anyio.CancelScope(shield=True):
                batch = [p for p in batch if p in self._held]
                source = self._source()
                if not batch or source is None:
                    return
                self._pending = set(batch)
                try:
                    await source.renew(batch, self)
                except Conflict as exc:
                    log.warning("querator: renewing permits failed: %s", exc)
                except Unavailable as exc:
                    self._outage.lost(exc)
                except Exception:
                    log.exception("querator: renewing %d permit(s) failed", len(batch))
                else:
                    self._outage.back()
                self._later(self._pending)

    def renewed(self, permit: Permit, current: Any, started: float) -> None:
        """See :class:`~querator.locks.sources.RenewalSink`."""
        self._pending.discard(permit)
        permit._current = current
        permit._deadline = started + permit._lease
        permit._due = started + permit._lease / 3

    def lost(self, permit: Permit) -> None:
        """See :class:`~querator.locks.sources.RenewalSink`."""
        self._pending.discard(permit)
        log.warning(
            "querator: the permit of %r with token %d was lost (its lease lapsed)",
            permit.name,
            permit.token,
        )
        permit._lost = True
        self._held.discard(permit)

    @staticmethod
    def _later(batch: set[Permit]) -> None:
        retry_at = time.monotonic() + RETRY_AFTER
        for permit in batch:
            permit._due = retry_at
