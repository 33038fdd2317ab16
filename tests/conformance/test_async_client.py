"""AsyncQuerator has every method of Querator, as coroutines, with the same results."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from querator import AsyncQuerator, Item, QueueSettings, Ref
from querator.errors import (
    Conflict,
    ConflictReason,
    InvalidArgument,
    QueueExists,
    QueueNotFound,
    RequestTimeout,
)
from querator.queue.models import QueueInfo

from .helpers import ids_of, later

pytestmark = pytest.mark.anyio


async def test_queue_admin(aq: AsyncQuerator, qname: str) -> None:
    info = await aq.create_queue(qname, QueueSettings(lease_timeout=5))
    with pytest.raises(QueueExists):
        await aq.create_queue(qname)
    assert await aq.get_queue(qname) == info
    updated = await aq.update_queue(qname, QueueSettings(lease_timeout=7, partitions=2))
    assert updated.settings.partitions == 2
    assert [i.name for i in await aq.list_queues(pivot=qname)] == [qname]
    await aq.delete_queue(qname)
    assert await aq.list_queues() == []


async def test_item_lifecycle(aq: AsyncQuerator, qname: str) -> None:
    await aq.create_queue(qname, QueueSettings(lease_timeout=30))
    ids = await aq.produce(qname, [Item(payload=b"a"), Item(payload=b"b"), Item(payload=b"c")])
    await aq.produce(qname, [Item(payload=b"later", enqueue_at=later(3600))])
    assert ids_of(await aq.list_items(qname, limit=3)) == ids
    assert len(await aq.list_scheduled(qname)) == 1

    a, b, c = await aq.lease(qname, client_id="async", batch_size=3)
    assert ids_of([a, b, c]) == ids
    (renewed,) = await aq.renew(qname, [b], extend=60)
    assert renewed.version > b.version
    await aq.retry(qname, [c])
    await aq.complete(qname, [a])
    with pytest.raises(Conflict) as err:
        await aq.complete(qname, [a])
    assert err.value.reasons == {a.id: ConflictReason.MISSING}

    stats = await aq.stats(qname)
    assert (stats.total, stats.leased, stats.scheduled) == (3, 1, 1)
    result = await aq.transact(complete=[renewed], produce={qname: [Item(payload=b"d")]})
    assert len(result.produced[qname]) == 1
    await aq.delete_items(qname, [c.id])
    assert await aq.clear(qname, destructive=True) == 2
    assert await aq.run_maintenance() >= 0
    with pytest.raises(RequestTimeout):
        await aq.lease(qname, client_id="async")


async def test_async_transact_conflict(aq: AsyncQuerator, qname: str) -> None:
    await aq.create_queue(qname)
    await aq.produce(qname, [Item(payload=b"a")])
    (stored,) = await aq.list_items(qname)
    with pytest.raises(Conflict) as err:
        await aq.transact(complete=[Ref(qname, stored.id, stored.version)])
    assert err.value.reasons == {stored.id: ConflictReason.NOT_LEASED}


async def test_concurrent_callers_share_one_look_up_of_a_queue(
    backend_url: str, qname: str
) -> None:
    async with AsyncQuerator(backend_url, cache_ttl=60.0) as client:
        await client.create_queue(qname)
        backend = client._backend
        real = backend.get_queue
        calls: list[str] = []

        async def counted(name: str) -> QueueInfo:
            calls.append(name)
            return await real(name)

        backend.get_queue = counted  # type: ignore[method-assign]
        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(client.queue_info, qname)
        assert calls == [qname]
        assert (await client.queue_info(qname)).name == qname
        assert calls == [qname]  # and then it comes from the cache


async def test_a_silent_transaction_wakes_no_watcher(
    aq: AsyncQuerator, backend_name: str, backend_url: str, qname: str
) -> None:
    await aq.create_queue(qname)
    async with contextlib.AsyncExitStack() as stack:
        watchers = [aq]
        if backend_name != "memory":  # another client, woken from outside
            watchers.append(await stack.enter_async_context(AsyncQuerator(backend_url)))
        watches = [client.watch(qname) for client in watchers]
        # each client's listener wakes its watchers once when it is ready
        assert [await watch.wait(10) for watch in watches] == [True] * len(watches)
        await aq.commit(produce={qname: [Item(payload=b"quiet")]}, silent=[qname])
        assert [await watch.wait(0.3) for watch in watches] == [False] * len(watches)
        await aq.transact(produce={qname: [Item(payload=b"loud")]})
        assert [await watch.wait(10) for watch in watches] == [True] * len(watches)
    assert (await aq.stats(qname)).total == 2  # both are there all the same


async def test_a_commit_wakes_the_names_it_is_given_and_only_them(
    aq: AsyncQuerator, backend_name: str, backend_url: str, qname: str
) -> None:
    """``wake`` reaches a watcher of a name of its own (in every client of the
    store), not the watchers of other names; ``durable=False`` applies all the
    same (the locks' wake-one hand-off)."""
    if backend_name.startswith("http"):
        pytest.skip("commit's wake and durable are the library's (the HTTP API has no watch)")
    await aq.create_queue(qname)
    async with contextlib.AsyncExitStack() as stack:
        watchers = [aq]
        if backend_name != "memory":
            watchers.append(await stack.enter_async_context(AsyncQuerator(backend_url)))
        mine = [client.watch(f"{qname}.wake-me") for client in watchers]
        other = [client.watch(f"{qname}.not-me") for client in watchers]
        assert [await watch.wait(10) for watch in mine + other] == [True] * len(mine + other)
        result = await aq.commit(
            produce={qname: [Item(payload=b"x")]},
            silent=[qname],
            wake=[f"{qname}.wake-me"],
            durable=False,
        )
        assert [await watch.wait(10) for watch in mine] == [True] * len(mine)
        assert [await watch.wait(0.3) for watch in other] == [False] * len(other)
    assert result.produced[qname] and (await aq.stats(qname)).total == 1


async def test_a_wake_only_commit_wakes_and_changes_nothing(
    aq: AsyncQuerator, backend_name: str, backend_url: str, qname: str
) -> None:
    """``commit(wake=[...])`` with nothing else is a transaction of its own: it
    wakes the watchers of those names (in every client of the store), writes
    nothing, and a commit of nothing at all is still refused."""
    if backend_name.startswith("http"):
        pytest.skip("commit's wake is the library's (the HTTP API has no wake or watch)")
    await aq.create_queue(qname)
    with pytest.raises(InvalidArgument):
        await aq.commit()
    with pytest.raises(InvalidArgument):
        await aq.commit(wake=["not a name!"])
    async with contextlib.AsyncExitStack() as stack:
        watchers = [aq]
        if backend_name != "memory":
            watchers.append(await stack.enter_async_context(AsyncQuerator(backend_url)))
        mine = [client.watch(f"{qname}.ping") for client in watchers]
        other = [client.watch(f"{qname}.pong") for client in watchers]
        assert [await watch.wait(10) for watch in mine + other] == [True] * len(mine + other)
        result = await aq.commit(wake=[f"{qname}.ping"], durable=False)
        assert [await watch.wait(10) for watch in mine] == [True] * len(mine)
        assert [await watch.wait(0.3) for watch in other] == [False] * len(other)
    assert result.produced == {} and (await aq.stats(qname)).total == 0


async def test_concurrent_looks_at_a_missing_queue_all_say_so(
    aq: AsyncQuerator, qname: str
) -> None:
    """Many tasks asking at once for a queue that does not exist each get
    QueueNotFound (the info cache lets one look-up run at a time)."""
    errors: list[BaseException] = []

    async def ask() -> None:
        try:
            await aq.produce(qname, [Item(payload=b"x")])
        except QueueNotFound as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tasks:
        for _ in range(5):
            tasks.start_soon(ask)
    assert len(errors) == 5
