"""The client-side cut-off of calls in flight on one timer
(``postgres/deadline.py`` ``Cutoffs``): a call that ends in time is left alone,
each call that outlives its ``after`` is cut off, also those started while the
timer was set for an older call, and a client that goes idle keeps no timer."""

from __future__ import annotations

import time

import anyio
import pytest

from querator.queue.backends.postgres.deadline import Cutoffs

pytestmark = pytest.mark.anyio

AFTER = 0.3


async def _call(cutoffs: Cutoffs, hangs: float, took: dict[str, float], name: str) -> None:
    began = time.monotonic()
    with anyio.CancelScope() as cut:
        cutoffs.start(cut)
        try:
            await anyio.sleep(hangs)
        finally:
            cutoffs.end(cut)
    took[name] = time.monotonic() - began if cut.cancelled_caught else -1.0


async def test_each_call_past_its_cut_off_is_cancelled_and_no_other() -> None:
    cutoffs = Cutoffs(AFTER)
    took: dict[str, float] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(_call, cutoffs, 0.05, took, "quick")
        tg.start_soon(_call, cutoffs, 30.0, took, "first hung")
        await anyio.sleep(0.1)
        tg.start_soon(_call, cutoffs, 30.0, took, "second hung")  # after the timer was set
        tg.start_soon(_call, cutoffs, 0.05, took, "quick again")
    assert took["quick"] == took["quick again"] == -1.0
    assert AFTER <= took["first hung"] < AFTER + 2.0
    assert AFTER <= took["second hung"] < AFTER + 2.0
    assert cutoffs._timer is None  # nothing in flight: no timer is left armed


async def test_a_call_after_an_idle_spell_is_still_cut_off() -> None:
    cutoffs = Cutoffs(AFTER)
    took: dict[str, float] = {}
    await _call(cutoffs, 0.01, took, "quick")  # arms the timer, which fires on nothing
    await anyio.sleep(AFTER + 0.1)
    await _call(cutoffs, 30.0, took, "hung")
    assert took["quick"] == -1.0
    assert AFTER <= took["hung"] < AFTER + 2.0
