"""Completions: the items a worker's tasks finish together are completed by one
call; a lost lease among them fails that item alone (every backend)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from querator import AsyncQuerator, Item
from querator.errors import Conflict
from querator.queue.models import Leased
from querator.tasks.completions import Completions

pytestmark = pytest.mark.anyio


async def _leased(aq: AsyncQuerator, queue: str, count: int) -> list[Leased]:
    await aq.create_queue(queue)
    await aq.produce(queue, [Item(payload=f"p{i}".encode()) for i in range(count)])
    held = await aq.lease(queue, client_id="c", batch_size=count, timeout=5)
    assert len(held) == count
    return held


def _count_completes(aq: AsyncQuerator, calls: list[int]) -> None:
    """Record the size of every ``complete`` call of ``aq`` (the store still runs it)."""
    complete = aq.complete

    async def counted(queue: str, items: Any) -> None:
        calls.append(len(items))
        await complete(queue, items)

    aq.complete = counted  # type: ignore[method-assign]


async def test_items_finishing_together_are_completed_by_one_call(
    aq: AsyncQuerator, qname: str
) -> None:
    held = await _leased(aq, qname, 6)
    calls: list[int] = []
    _count_completes(aq, calls)
    completions = Completions(aq)
    async with anyio.create_task_group() as group:
        for leased in held:
            group.start_soon(completions.complete, leased)
    assert calls == [6]
    assert (await aq.stats(qname)).partitions[0].total == 0


async def test_one_item_alone_is_completed_at_once(aq: AsyncQuerator, qname: str) -> None:
    [leased] = await _leased(aq, qname, 1)
    await Completions(aq).complete(leased)
    assert (await aq.stats(qname)).partitions[0].total == 0


async def test_a_lost_lease_fails_its_item_alone_and_the_others_complete(
    aq: AsyncQuerator, qname: str
) -> None:
    held = await _leased(aq, qname, 4)
    lost = held[2]
    await aq.retry(qname, [lost])  # released meanwhile: this worker's version is stale
    completions = Completions(aq)
    failed: list[str] = []

    async def complete(leased: Leased) -> None:
        try:
            await completions.complete(leased)
        except Conflict:
            failed.append(leased.id)

    async with anyio.create_task_group() as group:
        for leased in held:
            group.start_soon(complete, leased)
    assert failed == [lost.id]
    [left] = await aq.lease(qname, client_id="c", batch_size=10, timeout=5)
    assert left.id == lost.id  # the released item is still there, the others are gone
    assert (await aq.stats(qname)).partitions[0].total == 1


async def test_complete_many_says_which_item_lost_its_lease_and_joins_the_others(
    aq: AsyncQuerator, qname: str
) -> None:
    held = await _leased(aq, qname, 5)
    await aq.retry(qname, [held[1]])  # released meanwhile: this worker's version is stale
    calls: list[int] = []
    _count_completes(aq, calls)
    completions = Completions(aq)
    results: list[list[BaseException | None]] = []

    async def many(items: list[Leased]) -> None:
        results.append(await completions.complete_many(items))

    async with anyio.create_task_group() as group:
        group.start_soon(many, held[:3])
        group.start_soon(completions.complete, held[3])
        group.start_soon(many, held[4:])
    first = next(r for r in results if len(r) == 3)
    assert [type(error) for error in first] == [type(None), Conflict, type(None)]
    assert calls[0] == 5  # one call for all, then each item of it alone
    assert (await aq.stats(qname)).partitions[0].total == 1
