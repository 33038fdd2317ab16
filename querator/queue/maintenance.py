"""Maintenance: the dead-letter sweep, run by one client of the whole fleet per interval.

Every open client runs :func:`maintain_forever` in the background. Each
interval it asks the store for the turn (``Backend.claim_maintenance``: one
caller wins per interval across every process); the winner runs
:func:`run_maintenance`, which moves every exhausted or expired, unheld item
of every queue to its dead queue (or deletes it when the queue has none), in
batches of :data:`MAINTENANCE_BATCH`. A store outage is logged once, not at
every interval.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from querator.errors import QueueNotFound, Unavailable
from querator.queue.backends.base import Backend
from querator.queue.models import QueueInfo
from querator.queue.outage import Outage

__all__ = ["MAINTENANCE_BATCH", "maintain_forever", "run_maintenance"]

log = logging.getLogger("querator")

MAINTENANCE_BATCH = 1_000
"""Items moved per dead-letter statement during maintenance."""
_QUEUES_PAGE = 100
"""Queues read per page while sweeping them all."""


async def maintain_forever(
    backend: Backend, interval: float, run: Callable[[], Awaitable[int]]
) -> None:
    """Every ``interval`` seconds, claim the maintenance turn and, if won, ``run()``.

    Runs until cancelled; failures are logged and the next interval tries again.
    """
    outage = Outage(log, "querator: maintenance")
    while True:
        await anyio.sleep(interval)
        try:
            if await backend.claim_maintenance(interval):
                await run()
        except Unavailable as exc:
            outage.lost(exc)  # once per outage, not a traceback every interval
        except Exception:
            log.exception("querator: maintenance failed; will try again")
        else:
            outage.back()


async def run_maintenance(backend: Backend, wake: Callable[[str], None]) -> int:
    """Dead-letter every exhausted or expired unheld item of every queue now.

    Returns how many items moved; ``wake`` is called with the name of each
    dead queue that received some (its local waiters look again). The queues
    are read once, a page at a time, and dead queues are found among them (no
    look-up per queue).
    """
    queues: dict[str, QueueInfo] = {}
    pivot: str | None = None
    while True:
        page = await backend.list_queues(pivot, _QUEUES_PAGE + 1)
        queues.update((info.name, info) for info in page[:_QUEUES_PAGE])
        if len(page) <= _QUEUES_PAGE:
            break
        pivot = page[_QUEUES_PAGE].name
    moved = 0
    for info in queues.values():
        moved += await _dead_letter_queue(backend, info, queues, wake)
    return moved


async def _dead_letter_queue(
    backend: Backend,
    info: QueueInfo,
    queues: dict[str, QueueInfo],
    wake: Callable[[str], None],
) -> int:
    dead_name = info.settings.dead_queue
    dead = queues.get(dead_name) if dead_name else None
    if dead_name and dead is None:
        try:  # created after the listing
            dead = await backend.get_queue(dead_name)
        except QueueNotFound:
            log.warning("querator: dead queue %r of %r is missing", dead_name, info.name)
            return 0
    moved = 0
    while True:
        count = await backend.dead_letter_due(info, dead, MAINTENANCE_BATCH)
        moved += count
        if count < MAINTENANCE_BATCH:
            break
    if moved and dead is not None:
        wake(dead.name)
    return moved
