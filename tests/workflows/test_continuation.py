"""Eager continuation: a step's commit advances its run and hands the next step
to the same worker, already leased (see ``querator.workflows.continuation``)."""

from __future__ import annotations

from worker_threads import serving

from querator import Querator
from querator.workflows import Worker, start, step, workflow

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
    # The start wake is the only item leased; each step was handed over.
    assert (counts["leased"], counts["handed_over"]) == (1, 3)
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
