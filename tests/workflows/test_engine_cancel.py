"""Cancellation, workflow timeouts and step timeouts."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import (
    RetryPolicy,
    WorkflowCancelled,
    WorkflowFailed,
    sleep,
    sleep_async,
    start,
    step,
    workflow,
)
from querator.workflows.keys import RESULTS_QUEUE, step_key

from .conftest import RunWorker
from .flows import CALLS, count_call

OTHER_QUEUE = "e-other-steps"


@step(name="e.note")
def note(key: str) -> str:
    count_call(f"note:{key}")
    return key


@step(name="e.remote", queue=OTHER_QUEUE)
def remote(key: str) -> str:
    count_call(f"remote:{key}")
    return key


@workflow(name="e.dozer")
def dozer(key: str) -> str:
    note(key)
    sleep(30)
    return note(f"{key}-after")


@workflow(name="e.remote_flow")
def remote_flow(key: str) -> str:
    return remote(key)


@workflow(name="e.bounded", timeout=0.4)
def bounded(key: str) -> str:
    sleep(30)
    return key


@step(name="e.slow_async", timeout=0.1, retry=RetryPolicy(max_attempts=2, initial=0.01))
async def slow_async(key: str) -> str:
    count_call(f"slow_async:{key}")
    await anyio.sleep(10)
    return key


@step(name="e.slow_sync", timeout=0.05, retry=RetryPolicy(max_attempts=1))
def slow_sync(key: str) -> str:
    count_call(f"slow_sync:{key}")
    threading.Event().wait(0.2)
    return key


@workflow(name="e.timeouts")
async def timeouts(kind: str) -> str:
    await sleep_async(0)
    if kind == "async":
        return await slow_async(kind)
    return slow_sync(kind)


def test_cancel_a_sleeping_run(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([dozer, note]):
        run = start(q, dozer, "c1")
        wait_for(lambda: q.lookup(RESULTS_QUEUE, [step_key(run.run_id, 1)]), 20, message="sleeping")
        assert run.cancel("no longer needed") is True
        with pytest.raises(WorkflowCancelled, match="no longer needed"):
            run.result(timeout=20)
    assert run.status() == "cancelled"
    assert run.cancel() is False
    assert CALLS["note:c1"] == 1 and CALLS["note:c1-after"] == 0


def test_cancel_before_a_worker_serves_the_run(q: Querator, run_worker: RunWorker) -> None:
    run = start(q, dozer, "c2")
    assert run.cancel() is True
    with run_worker([dozer, note]), pytest.raises(WorkflowCancelled):
        run.result(timeout=20)
    assert CALLS["note:c2"] == 0


@workflow(name="e.stepless")
def stepless(key: str) -> str:
    return key


@workflow(name="e.sleeper_first")
def sleeper_first(key: str) -> str:
    sleep(0)
    return note(key)


@pytest.mark.parametrize("flow", [stepless, sleeper_first, dozer], ids=lambda f: f.name)
def test_a_run_cancelled_before_its_first_replay_ends_cancelled(
    q: Querator, run_worker: RunWorker, flow: Any
) -> None:
    """Its start wake's replay knows nothing of the cancel request: whatever
    that replay would do first (end the run, sleep, run a step), the run ends
    cancelled and no step runs."""
    run = start(q, flow, "c4")
    assert run.cancel() is True
    with run_worker([flow, note]) as worker, pytest.raises(WorkflowCancelled):
        run.result(timeout=20)
    assert run.status() == "cancelled"
    assert CALLS["note:c4"] == 0
    assert worker.worker.counts["looked_up"] >= 1


def test_cancelled_run_skips_its_dispatched_step(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([remote_flow]):  # serves the workflow queue, not the step's queue
        run = start(q, remote_flow, "c3")
        wait_for(lambda: q.stats(OTHER_QUEUE).total if _exists(q) else 0, 20, message="step")
        run.cancel()
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=20)
    with run_worker([remote]):
        wait_for(lambda: q.stats(OTHER_QUEUE).total == 0, 20, message="step item skipped")
    assert CALLS["remote:c3"] == 0


def _exists(q: Querator) -> bool:
    return any(info.name == OTHER_QUEUE for info in q.list_queues())


def test_workflow_timeout_fails_the_run(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([bounded]):
        began = time.monotonic()
        run = start(q, bounded, "t1")
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=20)
        assert time.monotonic() - began >= 0.4
    assert failed.value.error_type == "WorkflowTimeout"
    assert run.status() == "failed"


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_step_timeout_is_a_failure_per_policy(
    q: Querator, run_worker: RunWorker, kind: str
) -> None:
    with run_worker([timeouts, slow_async, slow_sync]):
        run = start(q, timeouts, kind)
        with pytest.raises(WorkflowFailed, match="StepTimeout"):
            run.result(timeout=20)
    assert CALLS[f"slow_{kind}:{kind}"] == (2 if kind == "async" else 1)
