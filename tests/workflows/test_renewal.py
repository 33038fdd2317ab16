"""The worker's lease renewer (``querator.workflows.engine.renewal``) on a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from polling import await_for

from querator import AsyncQuerator, Item, QueueSettings
from querator.queue.models import Leased
from querator.workflows.engine.renewal import Renewer

pytestmark = pytest.mark.anyio

PERIOD = 0.05
"""Seconds between renewals: short, so a test sees several."""


async def _leased(aq: AsyncQuerator, queue: str) -> Leased:
    await aq.create_queue(queue, QueueSettings(lease_timeout=5.0))
    await aq.produce(queue, [Item(payload=b"step")])
    [leased] = await aq.lease(queue, client_id="w1")
    return leased


@asynccontextmanager
async def _running(aq: AsyncQuerator) -> AsyncIterator[Renewer]:
    """A renewer with its task running for the block."""
    renewer = Renewer(aq)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(renewer.run)
        yield renewer
        tasks.cancel_scope.cancel()


async def test_kept_leases_are_renewed_until_released(aq: AsyncQuerator) -> None:
    leased = await _leased(aq, "kept")
    async with _running(aq) as renewer:
        kept = renewer.keep(leased, 5.0, PERIOD)
        await await_for(lambda: kept.current.version >= leased.version + 2)
        current = await renewer.release(kept)
    # the version released is the item's latest: completing with it succeeds
    assert current.version >= leased.version + 2
    await aq.complete("kept", [current])
    assert (await aq.stats("kept")).total == 0


async def test_a_lost_lease_is_dropped_and_its_version_left_stale(aq: AsyncQuerator) -> None:
    leased = await _leased(aq, "lost")
    async with _running(aq) as renewer:
        kept = renewer.keep(leased, 5.0, PERIOD)
        await await_for(lambda: kept.current.version > leased.version)
        seen = kept.current
        await aq.complete("lost", [seen])  # finished elsewhere: the lease is gone
        await await_for(lambda: kept not in renewer)  # its next renewal found it gone
        current = await renewer.release(kept)
    assert current == seen
    assert kept not in renewer
