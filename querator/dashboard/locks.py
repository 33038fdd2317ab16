"""The Locks page: the semaphores and locks of :mod:`querator.locks` (holders
with their fencing tokens, and waiters), and the rate limits of
:mod:`querator.limits` with their keys' starts in the current period.

A rate limit is a queue of slots (``querator.rate.<name>``): each start
leases one of its key's ``n`` slots for ``per`` seconds, so the leased slots
of a key are its starts counted now. The page reads the slot queues a page
at a time (at most :data:`SLOTS_READ` slots a limit), never counting a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from querator.dashboard.render import page
from querator.dashboard.session import Viewer
from querator.limits.rules import QUEUE_PREFIX, limits_of
from querator.locks import list_semaphores_async
from querator.queue.models import QueueInfo

if TYPE_CHECKING:
    from querator.dashboard.served import Served

LIMITS_SHOWN = 100
"""Rate limits the page lists."""
SLOTS_READ = 500
"""Slots of one rate limit the page reads (its first keys, by slot id)."""


@dataclass
class KeyUse:
    """One key of a rate limit: its starts in the current period."""

    key: str
    used: int = 0
    next_free: datetime | None = None
    """When its next start is admitted, while none would be now (its slots
    are leased, or spread over the period and not due yet)."""


@dataclass
class RateRow:
    """One rate limit as the page shows it."""

    name: str
    n: int
    per: float
    keys: list[KeyUse] = field(default_factory=list)
    more: bool = False
    """More slots than :data:`SLOTS_READ`: the keys shown are the first ones."""


async def _row(state: Served, info: QueueInfo, n: int, per: float) -> RateRow:
    now = state.aq.clock.now()
    uses: dict[str, KeyUse] = {}
    read = 0
    for partition in range(info.settings.partitions):
        found = await state.aq.list_items(info.name, partition=partition, limit=SLOTS_READ)
        read += len(found)
        for slot in found:
            use = uses.setdefault(slot.kind, KeyUse(slot.kind))
            leased = slot.lease_deadline is not None and slot.lease_deadline > now
            use.used += leased
            free_at = slot.lease_deadline if leased else slot.available_at
            if free_at is not None:
                use.next_free = free_at if use.next_free is None else min(use.next_free, free_at)
    for use in uses.values():
        if use.next_free is not None and use.next_free <= now:
            use.next_free = None  # a slot is free now
    keys = sorted(uses.values(), key=lambda use: use.key)
    return RateRow(info.name[len(QUEUE_PREFIX) :], n, per, keys, read >= SLOTS_READ)


async def rate_limits(state: Served) -> list[RateRow]:
    """The rate limits of the store (the first :data:`LIMITS_SHOWN`, by name)."""
    rows: list[RateRow] = []
    infos = await state.aq.list_queues(pivot=QUEUE_PREFIX, limit=LIMITS_SHOWN)
    for info in infos:
        if not info.name.startswith(QUEUE_PREFIX):
            break
        limits = limits_of(info.settings.reference or "")
        if limits is not None:
            rows.append(await _row(state, info, *limits))
    return rows


async def locks(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/locks``: every semaphore and lock with its holders and waiters,
    and every rate limit with its keys."""
    found = await list_semaphores_async(state.aq)
    rates = await rate_limits(state)
    return page(request, "locks.html", viewer, semaphores=found, rates=rates)
