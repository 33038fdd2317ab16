"""Keeping held permits alive: one task per client renews all of its permits,
in batches (one atomic ``transact`` of every permit due within half a period).
"""

from __future__ import annotations

import logging
import math
import time
import weakref

import anyio

from querator.errors import Conflict, Unavailable
from querator.locks.permit import Permit
from querator.queue.outage import Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH

log = logging.getLogger("querator.locks")

RETRY_AFTER = 0.5
"""Seconds before a renewal that failed for another reason than a lost lease
(the store unreachable) is tried again."""

_RENEWERS: weakref.WeakKeyDictionary[AsyncQueueClient, PermitRenewer] = weakref.WeakKeyDictionary()


def renewer_of(aq: AsyncQueueClient) -> PermitRenewer:
    """The renewer of ``aq``'s permits, started on first use (on ``aq``'s loop)."""
    renewer = _RENEWERS.get(aq)
    if renewer is None:
        renewer = _RENEWERS[aq] = PermitRenewer(aq)
    if not renewer.running:  # first use, or the client was closed and opened again
        aq.run_in_background(renewer.run)
        renewer.running = True
    return renewer


class PermitRenewer:
    """Renews each held permit a third of its lease after the last renewal,
    until it is dropped; marks a permit lost when the store refuses it."""

    def __init__(self, aq: AsyncQueueClient) -> None:
        self._aq = aq
        self._held: set[Permit] = set()
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
                while batch := [p for p in batch if p in self._held]:
                    started = time.monotonic()
                    try:
                        result = await self._aq.transact(renew=[p._current for p in batch])
                    except Conflict as exc:
                        refused = [p for p in batch if p._current.id in exc.reasons]
                        for permit in refused:
                            self._lose(permit)
                        if refused:
                            continue  # renew the others at once
                        log.warning("querator: renewing permits failed: %s", exc)
                        self._later(batch)
                        return
                    except Unavailable as exc:
                        self._outage.lost(exc)
                        self._later(batch)
                        return
                    except Exception:
                        log.exception("querator: renewing %d permit(s) failed", len(batch))
                        self._later(batch)
                        return
                    self._outage.back()
                    renewed = {item.id: item for item in result.renewed}
                    for permit in batch:
                        permit._current = renewed[permit._current.id]
                        permit._deadline = started + permit._lease
                        permit._due = started + permit._lease / 3
                    return

    def _lose(self, permit: Permit) -> None:
        log.warning(
            "querator: the permit of %r with token %d was lost (its lease lapsed)",
            permit.name,
            permit.token,
        )
        permit._lost = True
        self._held.discard(permit)

    @staticmethod
    def _later(batch: list[Permit]) -> None:
        retry_at = time.monotonic() + RETRY_AFTER
        for permit in batch:
            permit._due = retry_at
