"""Eager continuation: a step's commit advances its run and hands the next step
to the same worker, already leased (see ``querator.workflows.engine.continuation``)."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

from worker_threads import serving

from querator import Querator
from querator.workflows import (
    StepFunction,
    Worker,
    WorkflowFunction,
    gather,
    start,
    step,
    workflow,
)

from .conftest import RunWorker
from .flows import CALLS, Order, charge, checkout, count_call, reserve, ship

STEP_POOL = "t.step-pool"


@step(name="t.pooled", queue=STEP_POOL)
def pooled(x: int) -> int:
    count_call(f"pooled:{x}")
    return x + 1


@workflow(name="t.through_pool")
def through_pool(x: int) -> int:
    return pooled(pooled(x))


def test_a_linear_run_takes_one_lease(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([checkout, reserve, charge, ship]) as worker:
        run = start(q, checkout, Order("o1", 250))
        assert run.result(timeout=20) == {
            "charged": 250,
            "shipped": {"order": "o1", "reservation": "R-o1"},
        }
    counts = worker.worker.counts
    # The start wake is the only item leased; each step was handed over; the
    # start wake carried what the first replay needed: nothing was looked up.
    assert (counts["leased"], counts["handed_over"], counts["looked_up"]) == (1, 3, 0)
    assert all(CALLS[f"{name}:o1"] == 1 for name in ("reserve", "charge", "ship"))


def test_steps_of_another_pool_go_through_their_queue(q: Querator, run_worker: RunWorker) -> None:
    """The workflow's worker does not serve the step's queue: it dispatches the
    step items there (no hand-over), and the pool's worker wakes the run."""
    pool_worker = serving(Worker(q, [pooled], poll_timeout=1.0))
    with pool_worker as pool, run_worker([through_pool]) as flows:
        run = start(q, through_pool, 1)
        assert run.result(timeout=20) == 3
    assert flows.worker.counts["handed_over"] == 0
    assert pool.worker.counts["handed_over"] == 0
    assert pool.worker.counts["leased"] == 2
    assert CALLS["pooled:1"] == 1 and CALLS["pooled:2"] == 1


@step(name="t.once")
def once(key: str) -> str:
    count_call(key)
    return key


@workflow(name="t.fan_and_line")
def fan_and_line(run: str) -> list[str]:
    first = once(f"{run}/a")
    middle = gather([once.spawn(f"{run}/b{i}") for i in range(3)])
    return [first, *middle, once(f"{run}/z")]


def test_no_step_runs_twice_with_competing_workers(
    q: Querator, run_worker: RunWorker, backend_url: str
) -> None:
    """Two workers (each with its own client, as two processes would have)
    race on many runs mixing hand-overs, gathers and wakes: every step body
    runs exactly once."""
    runs = 24
    fns: list[StepFunction[..., Any] | WorkflowFunction[..., Any]] = [fan_and_line, once]
    with ExitStack() as stack:
        # memory:// lives in one client: there the second worker shares it.
        other = q if backend_url == "memory://" else stack.enter_context(Querator(backend_url))
        stack.enter_context(run_worker(fns, concurrency=4))
        stack.enter_context(serving(Worker(other, fns, concurrency=4, poll_timeout=1.0)))
        handles = [start(q, fan_and_line, f"r{n}") for n in range(runs)]
        for n, handle in enumerate(handles):
            expected = [f"r{n}/a", *(f"r{n}/b{i}" for i in range(3)), f"r{n}/z"]
            assert handle.result(timeout=60) == expected
    counted = {key: calls for key, calls in CALLS.items() if key.startswith("r")}
    assert len(counted) == runs * 5
    assert set(counted.values()) == {1}, {k: v for k, v in counted.items() if v != 1}


def test_many_waiters_in_one_client_each_get_their_result(
    q: Querator, run_worker: RunWorker
) -> None:
    """Waiters of one client share their look-ups (one per wakeup): each still
    gets its own run's result, however the rounds interleave."""
    runs = [start(q, fan_and_line, f"w{n}") for n in range(16)]
    results: dict[int, list[str]] = {}

    def wait(n: int) -> None:
        results[n] = runs[n].result(timeout=60)

    with run_worker([fan_and_line, once], concurrency=8):
        waiters = [threading.Thread(target=wait, args=(n,)) for n in range(len(runs))]
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join(timeout=90)
    assert results == {
        n: [f"w{n}/a", *(f"w{n}/b{i}" for i in range(3)), f"w{n}/z"] for n in range(len(runs))
    }
