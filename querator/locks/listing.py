"""What ``querator locks list`` shows: each semaphore, its limit, holders and waiters."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from querator.locks.names import MAX_LIMIT, QUEUE_PREFIX, index_of, limit_of, name_of, token_of
from querator.locks.store import holder_of
from querator.locks.waiters import Waiter, waiters_of
from querator.model_bases import View
from querator.queue.client import QueueClient
from querator.queue.models import QueueInfo
from querator.queue.service import AsyncQueueClient

PAGE = 100
"""Queues read per page while listing."""


class Holder(View):
    """One held permit."""

    client_id: str
    """Who holds it."""
    since: datetime | None
    """When the holder took it (the holder's clock)."""
    permit: int
    """Which permit (0 to limit - 1; at or past the limit: to be removed on release)."""
    token: int
    """The permit's fencing token now: the holder's token, plus one per renewal
    (each renewal changes the permit's version)."""
    lease_deadline: datetime
    """When the permit comes back unless renewed."""


class SemaphoreInfo(View):
    """A semaphore as the store holds it now."""

    name: str
    limit: int
    """How many holders it admits."""
    lease: float
    """Seconds a lease lasts between renewals."""
    permits: int
    """Permit items that exist (more than ``limit`` while a lowered limit waits
    for holders to release the surplus ones)."""
    free: int
    """Permits no one holds now."""
    holders: list[Holder]
    """Who holds permits now, by permit."""
    waiters: list[Waiter] = Field(default_factory=list)
    """Who waits for a permit, in the order they will be served (each live
    client that waits holds a record, renewed while it waits)."""


async def list_semaphores_async(aq: AsyncQueueClient) -> list[SemaphoreInfo]:
    """Every semaphore of the store, by name, with its holders."""
    found: list[SemaphoreInfo] = []
    pivot: str | None = QUEUE_PREFIX
    while pivot is not None:
        page = await aq.list_queues(pivot, PAGE)
        ours = [info for info in page if name_of(info.name) is not None]
        found += [await _described(aq, info) for info in ours]
        last = page[-1].name if page else None
        pivot = last if len(page) == PAGE and last and last.startswith(QUEUE_PREFIX) else None
    return _unique(found)


def list_semaphores(q: QueueClient) -> list[SemaphoreInfo]:
    """:func:`list_semaphores_async` for the sync client."""
    return q.call(list_semaphores_async, q.aio)


async def _described(aq: AsyncQueueClient, info: QueueInfo) -> SemaphoreInfo:
    name = name_of(info.name) or ""
    items = await aq.list_items(info.name, limit=MAX_LIMIT)
    now = aq.clock.now()
    holders = []
    for item in items:
        if item.lease_deadline is not None and item.lease_deadline > now:
            owner, since = holder_of(item.client_id)
            holders.append(
                Holder(
                    client_id=owner,
                    since=since,
                    permit=index_of(item.dedup_key),
                    token=token_of(item.payload, item.version),
                    lease_deadline=item.lease_deadline,
                )
            )
    return SemaphoreInfo(
        name=name,
        limit=limit_of(info),
        lease=info.settings.lease_timeout,
        permits=len(items),
        free=len(items) - len(holders),
        holders=sorted(holders, key=lambda holder: holder.permit),
        waiters=await waiters_of(aq, name),
    )


def _unique(found: list[SemaphoreInfo]) -> list[SemaphoreInfo]:
    """Each semaphore once (page boundaries repeat the pivot), in name order."""
    return sorted({info.name: info for info in found}.values(), key=lambda info: info.name)
