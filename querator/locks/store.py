"""The operations of a semaphore on the queue layer, without background work:
create, acquire (lease a permit), renew, release (retry now, or complete a
surplus permit). :mod:`querator.locks.semaphore` adds the renewer on top; the
HTTP API calls these directly (a shell script renews by itself).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import anyio

from querator.errors import Conflict, InvalidArgument, LockLost, RequestTimeout
from querator.locks.names import (
    RENEW_ITEM_WITHIN,
    base_of,
    check_lease,
    check_limit,
    index_of,
    limit_of,
    permits,
    queue_of,
    settings_for,
    successor,
)
from querator.queue.models import Leased, QueueInfo, Ref
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration, check_name

MAX_OWNER = 480
"""The longest client id of a holder (the lease's client id adds ``.t<ms>``)."""
WAIT_CHUNK = 300.0
"""Seconds one lease call of an acquire without a timeout waits before looking again."""


async def ensure(aq: AsyncQueueClient, name: str, limit: object, lease: object) -> QueueInfo:
    """Create semaphore ``name`` with ``limit`` permits, or bring an existing one
    to that limit and lease duration: idempotent, and safe when several
    processes do it at once (permits are produced with dedup keys)."""
    queue = queue_of(name)
    settings = settings_for(check_limit(limit), check_lease(lease))
    info = await aq.create_queue(queue, settings, exist_ok=True)
    if info.settings != settings:
        info = await aq.update_queue(queue, settings)
    await aq.produce(queue, permits(limit_of(info)))
    return info


def check_owner(client_id: object) -> str:
    """``client_id`` if it is a valid holder id (a queue client id of at most
    :data:`MAX_OWNER` characters)."""
    owner = check_name("client_id", client_id)
    if len(owner) > MAX_OWNER:
        raise InvalidArgument("client_id", f"must be at most {MAX_OWNER} characters")
    return owner


def lease_client_id(owner: str, since: datetime) -> str:
    """The client id a permit is leased under: the holder's, and when it took it."""
    return f"{owner}.t{int(since.timestamp() * 1000)}"


def holder_of(client_id: str | None) -> tuple[str, datetime | None]:
    """The holder's client id and when it took the permit, from a lease's client id."""
    owner, _, stamp = (client_id or "").rpartition(".t")
    if owner and stamp.isdigit():
        return owner, datetime.fromtimestamp(int(stamp) / 1000, tz=UTC)
    return client_id or "", None


async def acquire(aq: AsyncQueueClient, name: str, client_id: str, timeout: float | None) -> Leased:
    """Lease a free permit of semaphore ``name`` for ``client_id``, waiting up to
    ``timeout`` seconds (None: until one is free). Surplus permits met on the way
    are removed. :class:`~querator.errors.RequestTimeout` when none came in time."""
    queue = queue_of(name)
    check_owner(client_id)
    left = None if timeout is None else check_duration("timeout", timeout, allow_zero=True)
    while True:
        wait = WAIT_CHUNK if left is None else left
        started = anyio.current_time()
        since = aq.clock.now()
        try:
            [leased] = await aq.lease(
                queue, client_id=lease_client_id(client_id, since), timeout=wait
            )
        except RequestTimeout:
            if left is None:
                continue
            raise RequestTimeout(f"no permit of {name!r} became free within {timeout}s") from None
        if left is not None:
            left = max(0.0, left - (anyio.current_time() - started))
        if not await is_surplus(aq, leased):
            return leased
        with contextlib.suppress(Conflict):
            await aq.complete(queue, [leased])


async def is_surplus(aq: AsyncQueueClient, permit: Leased) -> bool:
    """Whether ``permit`` is past its semaphore's current limit (to be removed)."""
    index = index_of(permit.dedup_key)
    return not 0 <= index < limit_of(await aq.queue_info(permit.queue))


async def renew(aq: AsyncQueueClient, name: str, item_id: str, version: int) -> Leased:
    """Extend a held permit's lease by the semaphore's lease duration; the permit
    with its new version. :class:`~querator.errors.LockLost` when it was lost."""
    queue = queue_of(name)
    try:
        [renewed] = await aq.renew(queue, [Ref(queue, item_id, version)])
    except Conflict:
        raise LockLost(name, version) from None
    return renewed


async def release(
    aq: AsyncQueueClient, name: str, held: Ref | Leased, index: int, token: int
) -> None:
    """Give held permit number ``index`` back (free at once, at the tail), or
    remove it when it is past the limit. :class:`~querator.errors.LockLost` when
    it was lost meanwhile (``token`` is the fencing token it was taken with).
    A permit item near its expiry (known when ``held`` is the :class:`Leased`
    item) is replaced by its successor in the same transaction."""
    queue = queue_of(name)
    ref = Ref(queue, held.id, held.version)
    surplus = not 0 <= index < limit_of(await aq.queue_info(queue))
    try:
        if surplus:
            await aq.complete(queue, [ref])
        elif isinstance(held, Leased) and _expiring(aq, held):
            base = base_of(held.payload)
            after = successor(held.dedup_key, held.version, base)
            await aq.transact(complete=[ref], produce={queue: [after]})
        else:
            await aq.retry(queue, [ref])
    except Conflict:
        raise LockLost(name, token) from None


def _expiring(aq: AsyncQueueClient, held: Leased) -> bool:
    return held.expire_at - aq.clock.now() < RENEW_ITEM_WITHIN
