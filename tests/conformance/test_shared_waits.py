"""Many leases waiting on one queue at once (they share their looks at the
store): each item still reaches exactly one waiter, whether a produce, a
scheduled item coming due or an expiring lease makes it leasable."""

from __future__ import annotations

import anyio
import pytest

from querator import AsyncQuerator, Item, Leased, QueueSettings

from .helpers import later

pytestmark = pytest.mark.anyio

WAITERS = 6


async def test_each_produced_item_reaches_one_of_many_waiters(
    aq: AsyncQuerator, qname: str
) -> None:
    await aq.create_queue(qname)
    got: list[list[Leased]] = []

    async def wait(n: int) -> None:
        got.append(await aq.lease(qname, client_id=f"w{n}", timeout=20))

    async with anyio.create_task_group() as tasks:
        for n in range(WAITERS):
            tasks.start_soon(wait, n)
        await anyio.sleep(0.3)  # deliberate: the waiters are all waiting first
        for n in range(WAITERS):
            await aq.produce(qname, [Item(payload=str(n).encode())])
    payloads = sorted(item.payload for batch in got for item in batch)
    assert payloads == [str(n).encode() for n in range(WAITERS)]


async def test_scheduled_items_and_expired_leases_reach_waiters(
    aq: AsyncQuerator, qname: str
) -> None:
    await aq.create_queue(qname, QueueSettings(lease_timeout=1.0))
    await aq.produce(qname, [Item(payload=b"held")])
    [held] = await aq.lease(qname, client_id="doomed")  # never completed: expires in 1 s
    got: list[list[Leased]] = []

    async def wait(n: int) -> None:
        batch = await aq.lease(qname, client_id=f"w{n}", timeout=20)
        await aq.complete(qname, batch)  # (a waiter's own lease must not expire too)
        got.append(batch)

    async with anyio.create_task_group() as tasks:
        for n in range(3):
            tasks.start_soon(wait, n)
        await anyio.sleep(0.1)  # deliberate: the waiters are all waiting first
        await aq.produce(qname, [Item(payload=b"due", enqueue_at=later(0.4))])
        await aq.produce(qname, [Item(payload=b"now")])
    payloads = sorted(item.payload for batch in got for item in batch)
    assert payloads == [b"due", b"held", b"now"]
    assert held.id in {item.id for batch in got for item in batch}
