"""One look-up per wakeup for every ``result()`` waiting in a client.

Each record written to the results queue wakes every run handle waiting in a
client; each of them would then look its own run up. Here the waiters of one
client share rounds instead: a round looks up the keys of every waiter
registered when it starts, and a waiter whose registration a finished round
covered reads that round's answer without a statement of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from querator.queue.models import StoredItem
from querator.queue.per_client import per_client
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE


class SharedLookups:
    """The look-up rounds of one client's waiters (use :func:`shared_lookups`)."""

    def __init__(self, aq: AsyncQueueClient) -> None:
        self._aq = aq
        self._lock = anyio.Lock()
        self._wanted: dict[int, Sequence[str]] = {}
        self._next = 0
        self._covered = -1
        """Registrations up to this number were in the last finished round."""
        self._found: dict[str, StoredItem] = {}

    async def lookup(self, keys: Sequence[str]) -> dict[str, StoredItem]:
        """The results-queue items holding ``keys``, from a look-up that started
        after this call (so nothing committed before the call is missed)."""
        ticket = self._next
        self._next += 1
        self._wanted[ticket] = keys
        try:
            async with self._lock:
                if self._covered < ticket:
                    covered = self._next - 1
                    wanted = sorted({key for each in self._wanted.values() for key in each})
                    found = await self._aq.lookup(RESULTS_QUEUE, wanted)
                    self._found, self._covered = found, covered
                return {key: self._found[key] for key in keys if key in self._found}
        finally:
            del self._wanted[ticket]


def shared_lookups(aq: AsyncQueueClient) -> SharedLookups:
    """The shared look-up rounds of client ``aq`` (call on its event loop)."""
    return per_client(aq, "result-lookups", lambda: SharedLookups(aq))
