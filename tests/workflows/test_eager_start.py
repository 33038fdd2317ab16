"""``start(..., eager=True)``: the caller runs the run's first steps itself, on
every backend, and leaves to the workers what it does not run."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import pytest

from querator import AsyncQuerator, Querator
from querator.errors import InvalidArgument, RequestTimeout
from querator.workflows import SagaFailed
from querator.workflows.engine.eager import CALLER_ID
from querator.workflows.keys import RESULTS_QUEUE, step_key
from querator.workflows.stored import StepRecord

from .conftest import RunWorker
from .flows import (
    CALLS,
    Order,
    async_flow,
    checkout,
    elsewhere,
    flaky_flow,
    hop,
    trip,
    unregistered,
)


def test_an_eager_start_runs_the_whole_run_in_the_caller(q: Querator) -> None:
    run = q.start(checkout, Order(id="e-1", cents=5), eager=True)
    assert run.result(timeout=0)["charged"] == 5  # no worker runs: the caller did
    assert run.status() == "completed"
    assert Counter({"reserve:e-1": 1, "charge:e-1": 1, "ship:e-1": 1}) == CALLS
    found = q.lookup(RESULTS_QUEUE, [step_key(run.run_id, p) for p in range(3)])
    records = [StepRecord.model_validate_json(item.payload) for item in found.values()]
    assert [r.worker for r in records] == [CALLER_ID] * 3


def test_a_workflow_without_steps_ends_in_the_eager_caller(q: Querator) -> None:
    run = q.start(unregistered, "plain", eager=True)
    assert run.result(timeout=0) == "plain"


def test_an_eager_start_leaves_a_step_of_another_queue_to_its_workers(
    q: Querator, run_worker: RunWorker
) -> None:
    run = q.start(hop, "h", eager=True)
    with pytest.raises(RequestTimeout):
        run.result(timeout=0)  # parked on the other queue's step
    assert Counter() == CALLS  # step_a ran (uncounted), ``elsewhere`` did not
    with run_worker([hop, elsewhere]):
        assert run.result(timeout=20) == ["a:h", "elsewhere:h", "b:h"]
    assert Counter({"elsewhere:h": 1}) == CALLS


def test_a_failed_eager_attempt_is_retried_by_the_workers(
    q: Querator, run_worker: RunWorker
) -> None:
    run = q.start(flaky_flow, "f", 1, eager=True)
    with pytest.raises(RequestTimeout):
        run.result(timeout=0)  # its retry is the workers'
    with run_worker([flaky_flow]):
        assert run.result(timeout=20) == "ok after 2"


def test_eager_is_ignored_by_a_start_with_an_idempotency_key(
    q: Querator, run_worker: RunWorker
) -> None:
    run = q.start(checkout, Order(id="k-1", cents=1), idempotency_key="k-1", eager=True)
    assert run.status() == "running"
    assert Counter() == CALLS
    with run_worker([checkout]):
        assert run.result(timeout=20)["charged"] == 1


def test_an_eager_saga_that_fails_is_compensated_by_the_workers(
    q: Querator, run_worker: RunWorker
) -> None:
    run = q.start(trip, "s", eager=True)
    assert Counter({"book:s": 1}) == CALLS  # the caller booked; payment failed for good
    with run_worker([trip]), pytest.raises(SagaFailed) as failed:
        run.result(timeout=20)
    assert failed.value.status == "compensated"
    assert Counter({"book:s": 1, "unbook:s": 1}) == CALLS


def test_eager_must_be_true_or_false(q: Querator) -> None:
    with pytest.raises(InvalidArgument, match="eager"):
        q.start(checkout, Order(id="b-1", cents=1), eager=cast(Any, "yes"))


@pytest.mark.anyio
async def test_an_async_eager_start_runs_the_run_in_the_caller(aq: AsyncQuerator) -> None:
    run = await aq.start(async_flow, 3, eager=True)
    assert await run.result(timeout=0) == [6, 12, 4]
    assert Counter({"double:3": 1, "double:6": 1}) == CALLS
