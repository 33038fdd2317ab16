"""The operations of a semaphore on the queue layer, without background work:
create, acquire (lease a permit), renew, release (retry now, or complete a
surplus permit). :mod:`querator.locks.semaphore` adds the renewer on top; the
HTTP API calls these directly (a shell script renews by itself).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import anyio

from querator.errors import Conflict, InvalidArgument, LockLost, QueueNotFound, RequestTimeout
from querator.locks import waiters
from querator.locks.names import (
    MAX_LIMIT,
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
from querator.queue.waiting import Watch

MAX_OWNER = 480
"""The longest client id of a holder (the lease's client id adds ``.t<ms>``)."""
EXPIRY_SLACK = 0.01
"""Seconds a waiter waits past a held permit's lease deadline before looking."""


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
    await waiters.ensure_wait_queue(aq, name, info.settings.lease_timeout)
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
    ``timeout`` seconds (None: until one is free). A client that must wait holds
    a waiter record (listed, served in arrival order) and is woken alone by the
    release that frees a permit for it (see :mod:`querator.locks.waiters`).
    Surplus permits met on the way are removed.
    :class:`~querator.errors.RequestTimeout` when none came in time."""
    queue_of(name)
    check_owner(client_id)
    left = None if timeout is None else check_duration("timeout", timeout, allow_zero=True)
    leased = await try_lease(aq, name, client_id)
    if leased is not None:
        return leased
    if left == 0:
        raise timed_out(name, timeout)
    deadline = None if left is None else anyio.current_time() + left
    wake = waiters.new_wake_name()
    watch = aq.watch(wake)
    record = await waiters.register(aq, name, client_id, wake)
    try:
        leased = await _wait(aq, record, client_id, watch, deadline)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await waiters.unregister(aq, record)
        raise
    await waiters.unregister(aq, record)
    if watch.fired():  # a release chose this waiter after it took a permit: pass it on
        await wake_for_free(aq, name, leased)
    if leased is None:
        raise timed_out(name, timeout)
    return leased


async def _wait(
    aq: AsyncQueueClient,
    record: waiters.Record,
    client_id: str,
    watch: Watch,
    deadline: float | None,
) -> Leased | None:
    """Look for a permit each time this waiter is woken, its record's renewal is
    due or a held permit's lease runs out, until ``deadline``; None at the deadline."""
    period = await waiters.record_lease(aq, record.name) / 3
    renew_at = anyio.current_time() + period
    while True:
        leased = await try_lease(aq, record.name, client_id)
        if leased is not None:
            return leased
        now = anyio.current_time()
        if deadline is not None and now >= deadline:
            return None
        if now >= renew_at:
            if not await waiters.renew(aq, record):
                fresh = await waiters.register(aq, record.name, client_id, record.wake)
                record.held = fresh.held
            renew_at = now + period
            continue  # looked before the renewal: look again
        until = min(renew_at, deadline if deadline is not None else renew_at)
        expiry = await _next_expiry(aq, record.name)
        if expiry is not None:
            until = min(until, now + expiry)
        await watch.wait(max(0.0, until - now))


async def try_lease(aq: AsyncQueueClient, name: str, client_id: str) -> Leased | None:
    """Lease a free permit now (None when none is free); surplus permits are removed."""
    queue = queue_of(name)
    while True:
        since = aq.clock.now()
        try:
            [leased] = await aq.lease(queue, client_id=lease_client_id(client_id, since))
        except RequestTimeout:
            return None
        if not await is_surplus(aq, leased):
            return leased
        with contextlib.suppress(Conflict):
            await aq.complete(queue, [leased])


async def _next_expiry(aq: AsyncQueueClient, name: str) -> float | None:
    """Seconds until the first held permit's lease runs out (None: none held)."""
    items = await aq.list_items(queue_of(name), limit=MAX_LIMIT)
    deadlines = [item.lease_deadline for item in items if item.lease_deadline is not None]
    if not deadlines:
        return None
    return max(0.0, (min(deadlines) - aq.clock.now()).total_seconds()) + EXPIRY_SLACK


async def wake_for_free(aq: AsyncQueueClient, name: str, held: Leased | None) -> None:
    """Wake one waiter per free permit of ``name`` (a wakeup this client received
    but did not use goes on to the next waiters)."""
    items = await aq.list_items(queue_of(name), limit=MAX_LIMIT)
    now = aq.clock.now()
    free = sum(1 for item in items if item.lease_deadline is None or item.lease_deadline <= now)
    wake = await waiters.next_wakes(aq, name, free)
    if not wake:
        return
    anchor = held or next(iter(items), None)
    if anchor is None:
        return
    with contextlib.suppress(Conflict, QueueNotFound):
        await aq.commit(
            depends=[Ref(anchor.queue, anchor.id, anchor.version)], wake=wake, durable=False
        )


def timed_out(name: str, timeout: float | None) -> RequestTimeout:
    """The error of an acquire that found no free permit of ``name`` in time."""
    return RequestTimeout(f"no permit of {name!r} became free within {timeout}s")


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
            wake = await waiters.next_wakes(aq, name, 1)
            await aq.commit(complete=[ref], produce={queue: [after]}, silent=[queue], wake=wake)
        else:
            wake = await waiters.next_wakes(aq, name, 1)
            await aq.commit(retry=[ref], silent=[queue], wake=wake, durable=False)
    except Conflict:
        raise LockLost(name, token) from None


def _expiring(aq: AsyncQueueClient, held: Leased) -> bool:
    return held.expire_at - aq.clock.now() < RENEW_ITEM_WITHIN
