"""``q.start(fn, ...)``: the design's way to start a run, on both clients."""

from __future__ import annotations

from typing import Any, assert_type

import pytest

from querator import AsyncQuerator, Querator, RunHandle
from querator.workflows import AsyncRunHandle, list_schedules, start, start_async

from .conftest import RunWorker
from .flows import (
    Order,
    async_double,
    async_flow,
    charge,
    checkout,
    flaky,
    flaky_flow,
    reserve,
    ship,
    step_a,
)


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


def test_handles_are_typed_as_the_workflow_returns(q: Querator, run_worker: RunWorker) -> None:
    # assert_type is checked by `mypy --strict tests` in the test command
    sync_run = q.start(flaky_flow, "typed", 0)
    async_run = start(q, async_flow, 3)
    assert_type(sync_run, RunHandle[str])
    assert_type(async_run, RunHandle[list[int]])
    with run_worker([flaky_flow, flaky, async_flow, async_double, step_a]):
        text = sync_run.result(timeout=20)
        numbers = async_run.result(timeout=20)
    assert_type(text, str)
    assert_type(numbers, list[int])
    assert text == "ok after 1" and numbers == [6, 12, len("a:12")]
    reattached = RunHandle(q, async_run.run_id)  # by id alone: plain JSON types
    assert_type(reattached.result(timeout=1), Any)


@pytest.mark.anyio
async def test_async_handles_are_typed_as_the_workflow_returns(aq: AsyncQuerator) -> None:
    run = await aq.start(async_flow, 1)
    also = await start_async(aq, checkout, Order(id="t", cents=1))
    assert_type(run, AsyncRunHandle[list[int]])
    assert_type(also, AsyncRunHandle[dict[str, object]])
    assert await run.status() == "running"
