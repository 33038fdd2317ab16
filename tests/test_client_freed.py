"""A closed client that nobody refers to any more is freed, with what other
modules kept for it (its permit source and renewer, shared result look-ups,
rate limiters): nothing global keeps it alive."""

from __future__ import annotations

import gc
import weakref

import pytest

from querator import AsyncQuerator
from querator.limits import AsyncRateLimiter, RateLimit
from querator.locks import AsyncSemaphore
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.result_lookups import shared_lookups


async def _used_and_closed() -> weakref.ref[AsyncQuerator]:
    aq = AsyncQuerator("memory://")
    await aq.open()
    sem = AsyncSemaphore(aq, "freed", 1)
    async with sem.acquire(timeout=5):  # starts the client's permit renewer
        pass
    await AsyncRateLimiter(aq, RateLimit("freed", 5)).try_acquire()
    await aq.create_queue(RESULTS_QUEUE)
    await shared_lookups(aq).lookup(["nothing"])
    await aq.close()
    return weakref.ref(aq)


@pytest.mark.anyio
async def test_a_closed_client_that_was_used_for_locks_and_lookups_is_freed() -> None:
    gone = await _used_and_closed()
    gc.collect()
    assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
