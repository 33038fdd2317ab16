"""``q.start(fn, ...)``: the design's way to start a run, on both clients."""

from __future__ import annotations

import pytest

from querator import AsyncQuerator, Querator, RunHandle
from querator.workflows import list_schedules

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship


def test_start_method_runs_a_workflow(q: Querator, run_worker: RunWorker) -> None:
    run = q.start(checkout, Order(id="m-1", cents=5), idempotency_key="m-1")
    assert isinstance(run, RunHandle)
    with run_worker([checkout, reserve, charge, ship]):
        assert run.result(timeout=20)["charged"] == 5
    again = q.start(checkout, Order(id="m-1", cents=999), idempotency_key="m-1")
    assert again.run_id == run.run_id and again.status() == "completed"


@pytest.mark.anyio
async def test_async_start_method_returns_the_same_run_for_a_key(aq: AsyncQuerator) -> None:
    first = await aq.start(checkout, Order(id="a-1", cents=1), idempotency_key="k")
    second = await aq.start(checkout, Order(id="a-1", cents=1), idempotency_key="k")
    assert first.run_id == second.run_id
    assert await first.status() == "running"


def test_schedule_method_defines_a_schedule(q: Querator) -> None:
    q.schedule(
        "nightly-checkout",
        checkout,
        cron="30 2 * * *",
        tz="Europe/Berlin",
        args=(Order(id="n", cents=3),),
    )
    [info] = [s for s in list_schedules(q) if s.name == "nightly-checkout"]
    assert (info.workflow, info.cron, info.tz) == ("t.checkout", "30 2 * * *", "Europe/Berlin")
