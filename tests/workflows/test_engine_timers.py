"""Durable timers (sleep / sleep_until), deferral from a step, and delayed starts."""

from __future__ import annotations

import contextvars
import time
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.errors import RequestTimeout
from querator.workflows import (
    Defer,
    RetryPolicy,
    Worker,
    WorkflowFailed,
    sleep,
    sleep_async,
    sleep_until,
    sleep_until_async,
    start,
    step,
    workflow,
)
from querator.workflows.engine.context import RunContext, Sleep, request_items
from querator.workflows.engine.fiber import Fiber, Finished
from querator.workflows.keys import RESULTS_QUEUE, SLEEP_STEP, step_key
from querator.workflows.stored import StepRecord

from .conftest import RunWorker
from .flows import CALLS, count_call


@step(name="e.before")
def before(key: str) -> str:
    count_call(f"before:{key}")
    return f"before:{key}"


@workflow(name="e.napper")
def napper(key: str, seconds: float) -> str:
    first = before(key)
    sleep(seconds)
    return f"{first}+slept"


@workflow(name="e.anapper")
async def anapper(key: str, until: datetime) -> str:
    await sleep_async(0.1)
    await sleep_until_async(until)
    return f"{key} woke"


@workflow(name="e.until")
def until_flow(until: datetime) -> str:
    sleep_until(until)
    return "done"


@step(
    name="e.deferring",
    retry=RetryPolicy(max_attempts=2, initial=0.01, max_delay=0.02, jitter=False),
)
def deferring(key: str, defers: int, failures: int) -> str:
    calls = count_call(f"deferring:{key}")
    if calls <= defers:
        raise Defer(0.05)
    if calls <= defers + failures:
        raise RuntimeError(f"failure {calls - defers}")
    return f"ok after {calls} calls"


@workflow(name="e.defer_flow")
def defer_flow(key: str, defers: int, failures: int) -> str:
    return deferring(key, defers, failures)


def _record(q: Querator, run_id: str, position: int) -> StepRecord | None:
    found = q.lookup(RESULTS_QUEUE, [step_key(run_id, position)])
    item = found.get(step_key(run_id, position))
    return StepRecord.model_validate_json(item.payload) if item else None


def test_sleep_resumes_the_run_after_the_delay(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([napper, before]):
        began = time.monotonic()
        run = start(q, napper, "s1", 0.4)
        assert run.result(timeout=20) == "before:s1+slept"
        assert time.monotonic() - began >= 0.4
    record = _record(q, run.run_id, 1)
    assert record is not None and record.step == SLEEP_STEP and record.until is not None
    assert CALLS["before:s1"] == 1


def test_sleep_survives_a_worker_restart(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([napper, before]):
        run = start(q, napper, "s2", 0.8)
        wait_for(lambda: _record(q, run.run_id, 1), timeout=20, message="sleep record")
    assert run.status() == "running"
    with run_worker([napper, before]):
        assert run.result(timeout=20) == "before:s2+slept"
    assert CALLS["before:s2"] == 1


def test_async_workflow_sleeps_and_sleeps_until(q: Querator, run_worker: RunWorker) -> None:
    until = datetime.now(UTC) + timedelta(seconds=0.3)
    with run_worker([anapper]):
        run = start(q, anapper, "a", until)
        assert run.result(timeout=20) == "a woke"
    assert datetime.now(UTC) >= until


def test_sleep_until_the_past_returns_at_once(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([until_flow]):
        run = start(q, until_flow, datetime.now(UTC) - timedelta(hours=1))
        assert run.result(timeout=20) == "done"


def test_replay_before_the_end_of_a_sleep_suspends_and_keeps_its_wake() -> None:
    now = datetime.now(UTC)
    until = now + timedelta(seconds=60)
    record = StepRecord(step=SLEEP_STEP, ok=True, result="null", until=until)

    async def first_call(ctx: RunContext) -> object:
        fiber = Fiber(lambda: ctx.sleep(1), contextvars.copy_context())
        message = await fiber.resume()
        await fiber.close()
        return message

    ctx = RunContext("run-x", "wfq", {0: record}, workflow="t.wf")
    parked = anyio.run(first_call, ctx)
    assert parked == Sleep(0, until, new=False)  # the stored end wins over a new duration
    assert isinstance(parked, Sleep)
    [wake] = request_items("run-x", ctx, parked)["wfq"]
    assert wake.kind == "querator.wake:t.wf"
    assert wake.enqueue_at == until and wake.dedup_key == "run-x/wake/0"
    past = record.model_copy(update={"until": now - timedelta(seconds=1)})
    assert anyio.run(first_call, RunContext("run-x", "wfq", {0: past})) == Finished(None)


def test_deferrals_do_not_use_retry_attempts(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([defer_flow, deferring]):
        run = start(q, defer_flow, "d1", 3, 1)  # 3 deferrals, 1 failure, then success
        assert run.result(timeout=20) == "ok after 5 calls"
    record = _record(q, run.run_id, 0)
    assert record is not None and record.attempts == 2


def test_failures_around_deferrals_still_exhaust_the_policy(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([defer_flow, deferring]):
        run = start(q, defer_flow, "d2", 2, 99)
        with pytest.raises(WorkflowFailed, match="failure 2"):
            run.result(timeout=20)
    assert CALLS["deferring:d2"] == 4  # two deferrals, then max_attempts=2 failures


def test_defer_rejects_a_negative_delay() -> None:
    with pytest.raises(ValueError, match="seconds"):
        Defer(-1)


def test_delayed_start_waits_before_the_first_replay(backend_url: str) -> None:
    # On a manual clock: the start is due when the clock says, whatever the time a
    # loaded machine (or a Citus coordinator's hop) takes between two calls.
    clock = ManualClock(datetime(2030, 6, 1, 12, 0, tzinfo=UTC))
    with (
        Querator(backend_url, clock=clock) as cq,
        serving(Worker(cq, [napper, before], poll_timeout=1.0), join_timeout=15),
    ):
        run = start(cq, napper, "late", 0.0, delay=3600)
        assert cq.list_scheduled("querator.workflows")
        with pytest.raises(RequestTimeout):
            run.result(timeout=0.5)  # not due on the clock (a real half second later)
        assert "before:late" not in CALLS
        clock.advance(hours=1)
        assert run.result(timeout=30) == "before:late+slept"


def test_a_wake_reproduced_while_completed_gets_another_key() -> None:
    from querator import Leased
    from querator.workflows.engine.commit import not_colliding
    from querator.workflows.stored import wake_item

    now = datetime.now(UTC)
    item = wake_item("run-x", "0", now, workflow="t.wf")
    leased = Leased(
        id="1", version=1, queue="wfq", partition=0, available_at=now, lease_deadline=now,
        client_id="c", attempts=1, expire_at=now, payload=b"", kind=item.kind,
        encoding=item.encoding, reference="run-x", headers={}, source_id=None,
        created_at=now, dedup_key="run-x/wake/0",
    )  # fmt: skip
    [renamed] = not_colliding(leased, {"wfq": [item]})["wfq"]
    assert renamed.dedup_key == "run-x/wake/0/r"
    back = leased.model_copy(update={"dedup_key": "run-x/wake/0/r"})
    assert not_colliding(back, {"wfq": [renamed]})["wfq"][0].dedup_key == "run-x/wake/0"
