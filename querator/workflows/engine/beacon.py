"""The progress beacon: after a worker's runs move (a step ends, a value is
published, a run waits), wake the watchers of :data:`PROGRESS_WAKE` — the
dashboard's live run pages — through the store's own wakeups (NOTIFY on
PostgreSQL, the local wakeups on SQLite), at most once per :data:`INTERVAL`.

It runs beside the worker's commits, never in them: a step's commit issues
no notification of its own (those nobody waits for stay silent), and a busy
worker sends at most one wakeup per interval, one statement each (a
wake-only commit: it changes nothing). An idle worker sends nothing. A lost
wakeup delays a page, never a run.
"""

from __future__ import annotations

import logging

import anyio

from querator.errors import QueratorError
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import PROGRESS_WAKE

__all__ = ["INTERVAL", "Beacon"]

log = logging.getLogger("querator.workflows")

INTERVAL = 0.5
"""Seconds between two wakeups of one worker at least (later moves wait for the next)."""


class Beacon:
    """Coalesces a worker's moves into wakeups of :data:`PROGRESS_WAKE`."""

    def __init__(self, aq: AsyncQueueClient, interval: float = INTERVAL) -> None:
        self.aq = aq
        self.interval = interval
        self.sent = 0
        """Wakeups sent so far."""
        self._due = anyio.Event()

    def poke(self, run_id: str) -> None:
        """Run ``run_id`` moved (call on the worker's event loop)."""
        self._due.set()

    async def run(self) -> None:
        """Send a wakeup after each poke, at most one per interval, until cancelled."""
        while True:
            await self._due.wait()
            self._due = anyio.Event()
            try:
                await self._send()
            except QueratorError as exc:  # best effort (the store may be away)
                log.debug("progress wakeup not sent: %s", exc)
            await anyio.sleep(self.interval)

    async def _send(self) -> None:
        """A transaction that changes nothing and wakes :data:`PROGRESS_WAKE`
        (one statement; the page of any run may be watching)."""
        await self.aq.commit(wake=[PROGRESS_WAKE], durable=False)
        self.sent += 1
