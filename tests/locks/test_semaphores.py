"""Semaphores and locks on every backend: permits, fencing tokens, limits."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import anyio
import pytest
from polling import wait_for

from querator import AsyncQuerator, Querator, Ref
from querator.clock import ManualClock
from querator.errors import Conflict, LockLost, RequestTimeout, UsageError
from querator.locks import AsyncLock, AsyncSemaphore, Lock, Semaphore, list_semaphores


def test_a_semaphore_admits_limit_holders_and_frees_a_permit_at_once(q: Querator) -> None:
    sem = Semaphore(q, "pool", 2)
    first, second = sem.acquire_permit(0), sem.acquire_permit(0)
    assert {first.index, second.index} == {0, 1}
    with pytest.raises(RequestTimeout, match="no permit of 'pool'"):
        sem.acquire_permit(0)
    sem.release(first)
    third = sem.acquire_permit(0)  # free at once: no wait for a lease to lapse
    assert third.index == first.index
    assert third.token > first.token, "a permit's token grows with every acquisition"
    sem.release(second)
    sem.release(third)
    sem.release(third)  # twice: nothing
    assert list_semaphores(q)[0].free == 2


def test_a_lock_blocks_until_released_and_hands_over(q: Querator) -> None:
    lock = Lock(q, "report")
    got: list[int] = []
    with lock.acquire(timeout=5) as held:

        def other() -> None:
            with Lock(q, "report").acquire(timeout=10) as permit:
                got.append(permit.token)

        thread = threading.Thread(target=other)
        thread.start()
        with pytest.raises(RequestTimeout):
            lock.acquire_permit(0)
        assert not got
    thread.join(10)
    assert got and got[0] > held.token


def test_creation_is_idempotent_and_races_give_the_same_permits(q: Querator) -> None:
    barrier = threading.Barrier(4)

    def create() -> None:
        barrier.wait()
        Semaphore(q, "shared", 3)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    Semaphore(q, "shared", 3)
    [info] = list_semaphores(q)
    assert (info.name, info.limit, info.permits, info.free) == ("shared", 3, 3, 3)


def test_a_higher_limit_adds_permits_a_lower_one_removes_them_on_release(q: Querator) -> None:
    small = Semaphore(q, "grow", 1)
    held = [small.acquire_permit(0)]
    big = Semaphore(q, "grow", 3)
    held += [big.acquire_permit(0), big.acquire_permit(0)]
    assert sorted(p.index for p in held) == [0, 1, 2]
    Semaphore(q, "grow", 1)
    [info] = list_semaphores(q)
    assert (info.limit, info.permits, len(info.holders)) == (1, 3, 3)
    for permit in held:
        small.release(permit)
    [info] = list_semaphores(q)
    assert (info.limit, info.permits, info.free) == (1, 1, 1)


def test_listing_shows_holders(q: Querator) -> None:
    sem = Semaphore(q, "listed", 2, client_id="me.1")
    before = time.time()
    permit = sem.acquire_permit(0)
    [info] = list_semaphores(q)
    [holder] = info.holders
    assert (holder.client_id, holder.permit) == ("me.1", permit.index)
    assert holder.token >= permit.token
    assert holder.since is not None and abs(holder.since.timestamp() - before) < 5
    assert (info.permits, info.free, info.waiters) == (2, 1, [])
    sem.release(permit)


def test_a_held_permit_is_renewed_past_its_lease(q: Querator) -> None:
    lock = Lock(q, "long", lease=0.3)
    with lock.acquire(timeout=1) as permit:
        first_token = list_semaphores(q)[0].holders[0].token
        wait_for(lambda: list_semaphores(q)[0].holders[0].token >= first_token + 3)
        assert not permit.lost
        with pytest.raises(RequestTimeout):
            lock.acquire_permit(0)


def test_a_permit_whose_lease_lapsed_is_lost_and_release_says_so(shared_url: str) -> None:
    with Querator(shared_url) as holder, Querator(shared_url) as other:
        permit = Lock(holder, "lapse", lease=0.3).acquire_permit(0)
        holder.close()  # the holder's renewer stops, as if the process froze
        taken = Lock(other, "lapse").acquire_permit(5)
        assert taken.token > permit.token
        assert permit.lost
    with Querator(shared_url) as again:
        lock = Lock(again, "lapse", lease=0.3)
        with pytest.raises(LockLost) as lost:
            lock.release(permit)
        assert lost.value.token == permit.token


def test_a_lost_permit_is_noted_on_the_blocks_own_error(q: Querator) -> None:
    lock = Lock(q, "noted", lease=0.2)
    with pytest.raises(KeyError) as raised, lock.acquire(0) as permit:
        permit._lost = True  # what the renewer sets when the store refuses it
        raise KeyError("boom")
    assert "was lost while held" in "".join(raised.value.__notes__)


@pytest.mark.anyio
async def test_async_semaphore(aq: AsyncQuerator) -> None:
    sem = AsyncSemaphore(aq, "async-pool", 2)
    entered = 0
    most = 0

    async def hold() -> None:
        nonlocal entered, most
        async with sem.acquire(timeout=10):
            entered += 1
            most = max(most, entered)
            await anyio.sleep(0.02)
            entered -= 1

    async with anyio.create_task_group() as tasks:
        for _ in range(6):
            tasks.start_soon(hold)
    assert most == 2
    async with AsyncLock(aq, "async-lock").acquire(0) as permit:
        assert permit.token > 0 and not permit.lost


def test_a_permit_in_use_outlives_its_items_expiry_and_its_tokens_go_on(
    backend_url: str,
) -> None:
    clock = ManualClock()
    with Querator(backend_url, clock=clock) as q:
        lock = Lock(q, "yearly")
        tokens = []
        for _ in range(3):  # held and released every few months, for more than a year
            with lock.acquire(0) as permit:
                tokens.append(permit.token)
            clock.advance(days=150)
            q.run_maintenance()  # what would dead-letter (delete) an expired item
        [item] = q.list_items("querator.lock.yearly")
        assert item.expire_at > clock.now() + timedelta(days=200)
        with lock.acquire(0) as permit:
            tokens.append(permit.token)
        assert tokens == sorted(set(tokens)), "tokens only grow, across successor items"
        assert list_semaphores(q)[0].permits == 1


@pytest.mark.anyio
async def test_renewals_go_on_after_the_client_is_opened_again(
    shared_url: str, anyio_backend: str
) -> None:
    aq = AsyncQuerator(shared_url)
    await aq.open()
    lock = AsyncLock(aq, "reopened", lease=0.3)
    async with lock.acquire(0):
        pass
    await aq.close()
    await aq.open()
    try:
        async with lock.acquire(0) as permit:
            await anyio.sleep(0.6)  # two leases long: renewals must keep it
            assert not permit.lost
    finally:
        await aq.close()


def test_one_renewer_keeps_many_permits(q: Querator) -> None:
    sem = Semaphore(q, "many", 40, lease=1.0)  # renewed every third of it
    held = [sem.acquire_permit(0) for _ in range(40)]
    first = {h.permit: h.token for h in list_semaphores(q)[0].holders}
    wait_for(
        lambda: all(h.token >= first[h.permit] + 2 for h in list_semaphores(q)[0].holders),
        message="every permit renewed twice",
    )
    assert not any(permit.lost for permit in held)
    for permit in held:
        sem.release(permit)
    assert list_semaphores(q)[0].free == 40


def test_a_renewal_the_store_refuses_marks_the_permit_lost(q: Querator) -> None:
    lock = Lock(q, "taken", lease=0.5)
    permit = lock.acquire_permit(0)

    def free_it_behind_the_holders_back() -> bool:
        [item] = q.list_items("querator.lock.taken")
        try:  # an operator's forced release: the version is all a change checks
            q.retry("querator.lock.taken", [Ref("querator.lock.taken", item.id, item.version)])
        except Conflict:
            return False  # renewed meanwhile: look again
        return True

    wait_for(free_it_behind_the_holders_back)
    wait_for(lambda: permit._lost, message="the renewer found the permit gone")
    assert permit.lost
    with pytest.raises(LockLost):
        lock.release(permit)


@pytest.mark.anyio
async def test_the_sync_semaphore_inside_an_event_loop_names_its_async_twin(
    anyio_backend: str,
) -> None:
    q = Querator("memory://")
    try:
        with pytest.raises(UsageError, match="use AsyncSemaphore"):
            Lock(q, "in-loop")
    finally:
        q.close()
