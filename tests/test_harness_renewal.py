"""The harness's lease renewer (``querator.queue.harness.renewal``) on a real store."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from polling import await_for

from querator import AsyncQuerator, Item, QueueSettings
from querator.queue.harness import Renewer
from querator.queue.models import Leased

pytestmark = pytest.mark.anyio

PERIOD = 0.05
"""Seconds between renewals: short, so a test sees several."""


async def _leased(aq: AsyncQuerator, queue: str, count: int = 1) -> list[Leased]:
    await aq.create_queue(queue, QueueSettings(lease_timeout=5.0))
    await aq.produce(queue, [Item(payload=b"step") for _ in range(count)])
    return await aq.lease(queue, client_id="w1", batch_size=count)


@asynccontextmanager
async def _running(aq: AsyncQuerator) -> AsyncIterator[Renewer]:
    """A renewer with its task running for the block."""
    renewer = Renewer(aq, logging.getLogger("querator.test"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(renewer.run)
        yield renewer
        tasks.cancel_scope.cancel()


async def test_kept_leases_are_renewed_until_released(aq: AsyncQuerator) -> None:
    [leased] = await _leased(aq, "kept")
    async with _running(aq) as renewer:
        kept = renewer.keep(leased, 5.0, PERIOD)
        await await_for(lambda: kept.current.version >= leased.version + 2)
        current = await renewer.release(kept)
    # the version released is the item's latest: completing with it succeeds
    assert current.version >= leased.version + 2
    await aq.complete("kept", [current])
    assert (await aq.stats("kept")).total == 0


async def test_a_lost_lease_is_dropped_and_its_version_left_stale(aq: AsyncQuerator) -> None:
    [leased] = await _leased(aq, "lost")
    async with _running(aq) as renewer:
        kept = renewer.keep(leased, 5.0, PERIOD)
        await await_for(lambda: kept.current.version > leased.version)
        seen = kept.current
        await aq.complete("lost", [seen])  # finished elsewhere: the lease is gone
        await await_for(lambda: kept not in renewer)  # its next renewal found it gone
        current = await renewer.release(kept)
    assert current == seen
    assert kept not in renewer


async def test_due_leases_are_renewed_together_and_a_lost_one_alone_is_dropped(
    aq: AsyncQuerator,
) -> None:
    first, second, third = await _leased(aq, "batch", 3)
    async with _running(aq) as renewer:
        kept = [renewer.keep(leased, 5.0, PERIOD) for leased in (first, second, third)]
        await await_for(
            lambda: all(
                k.current.version > k0.version
                for k, k0 in zip(kept, (first, second, third), strict=True)
            )
        )
        await aq.complete("batch", [kept[1].current])  # one finished elsewhere
        await await_for(lambda: kept[1] not in renewer)
        versions = [k.current.version for k in kept]
        await await_for(
            lambda: kept[0].current.version > versions[0] and kept[2].current.version > versions[2]
        )
        assert kept[0] in renewer and kept[2] in renewer and len(renewer) == 2
        current = [await renewer.release(k) for k in (kept[0], kept[2])]
    await aq.complete("batch", current)
    assert (await aq.stats("batch")).total == 0
