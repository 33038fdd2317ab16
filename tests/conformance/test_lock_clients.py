"""Locks, semaphores and rate limiters on every client: a library client of
each store, and the HTTP clients (``Lock(q)`` and ``RateLimiter(q)`` with
``q`` a :class:`querator.http.Querator`: the permits are held through the
server's ``/v1/locks.*`` and renewed by the client)."""

from __future__ import annotations

import anyio
import pytest
from polling import wait_for

from querator import Querator, Ref
from querator.errors import InvalidArgument, LockLost, RequestTimeout
from querator.limits import AsyncRateLimiter, RateLimit, RateLimiter
from querator.locks import AsyncLock, AsyncSemaphore, Lock, Semaphore
from querator.locks.names import queue_of
from querator.queue.client import QueueClient
from querator.queue.interface import AsyncQueueApi


def test_a_semaphore_admits_limit_holders_and_hands_a_permit_over(q: Querator, qname: str) -> None:
    sem = Semaphore(q, qname, 2, client_id="conf-holder")
    assert Semaphore(q, qname, 2).limit == 2  # creating it again: the same permits
    first, second = sem.acquire_permit(0), sem.acquire_permit(0)
    assert {first.index, second.index} == {0, 1}
    assert first.client_id == "conf-holder" and first.acquired_at is not None
    with pytest.raises(RequestTimeout, match=f"no permit of '{qname}'"):
        sem.acquire_permit(0.05)
    sem.release(first)
    third = sem.acquire_permit(0)  # free at once: no wait for a lease to lapse
    assert third.index == first.index
    assert third.token > first.token, "a permit's token grows with every acquisition"
    sem.release(second)
    sem.release(third)
    sem.release(third)  # twice: nothing
    with Lock(q, f"{qname}-lock").acquire(timeout=5) as held:
        assert held.index == 0 and not held.lost


def test_a_held_permit_is_renewed_until_released(q: Querator, qname: str) -> None:
    lock = Lock(q, qname, lease=0.3)
    with lock.acquire(timeout=5) as permit:
        first = permit._current.version
        wait_for(lambda: permit._current.version > first + 1, timeout=10, message="renewed twice")
        assert not permit.lost
        with pytest.raises(RequestTimeout):
            Lock(q, qname, lease=0.3).acquire_permit(0)  # still held
    again = lock.acquire_permit(0)
    assert again.token > permit.token
    lock.release(again)


def test_a_permit_taken_away_is_lost_and_its_release_says_so(
    q: Querator, q2: QueueClient, qname: str
) -> None:
    lock = Lock(q, qname, lease=0.3)
    permit = lock.acquire_permit(5)
    held = permit._current
    q2.retry(queue_of(qname), [Ref(queue_of(qname), held.id, held.version)])  # another's hands
    wait_for(lambda: permit.lost, timeout=10, message="the renewal finds the permit gone")
    with pytest.raises(LockLost):
        lock.release(permit)


@pytest.mark.anyio
async def test_async_locks_hold_and_exclude(aq: AsyncQueueApi, qname: str) -> None:
    lock = AsyncLock(aq, qname)  # type: ignore[arg-type]
    async with lock.acquire(timeout=5) as permit:
        other = AsyncSemaphore(aq, qname, 1)  # type: ignore[arg-type]
        with pytest.raises(RequestTimeout):
            await other.acquire_permit(0)
        got: list[int] = []

        async def wait_then_take() -> None:
            async with other.acquire(timeout=10) as taken:
                got.append(taken.token)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait_then_take)
            await anyio.sleep(0)  # let it start waiting
            await lock.release(permit)
        assert got and got[0] > permit.token


def test_a_rate_limiter_counts_starts_per_key(q: Querator, qname: str) -> None:
    limiter = RateLimiter(q, RateLimit(qname, 1, per=60.0), client_id="conf-starter")
    first = limiter.try_acquire("tenant-1")
    assert first.allowed and first.at is not None and first.retry_after == 0
    refused = limiter.try_acquire("tenant-1")
    assert not refused.allowed and refused.at is None and 0 < refused.retry_after <= 60
    with pytest.raises(RequestTimeout):
        limiter.acquire("tenant-1", timeout=0.05)
    assert limiter.acquire("tenant-2", timeout=5) >= first.at  # each key has its own
    with pytest.raises(InvalidArgument, match="exists with"):
        RateLimiter(q, RateLimit(qname, 3, per=60.0))


@pytest.mark.anyio
async def test_async_rate_limiter_admits_and_refuses(aq: AsyncQueueApi, qname: str) -> None:
    limiter = AsyncRateLimiter(aq, RateLimit(qname, 1, per=60.0))  # type: ignore[arg-type]
    await limiter.create()
    assert (await limiter.try_acquire()).allowed
    assert not (await limiter.try_acquire()).allowed


def test_a_lock_refuses_what_is_no_client(qname: str) -> None:
    with pytest.raises(InvalidArgument, match=r"must be a querator\.AsyncQuerator"):
        AsyncLock(object(), qname)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"must be a querator\.AsyncQuerator"):
        AsyncRateLimiter(object(), RateLimit(qname, 1))  # type: ignore[arg-type]
