"""Failures are debuggable and keys and ids are checked: tracebacks are stored and
shown, a result that cannot be stored is not retried, idempotency keys belong to
one workflow, an unknown run id is a typed error at once."""

from __future__ import annotations

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    IdempotencyConflict,
    RetryPolicy,
    RunHandle,
    RunNotFound,
    WorkflowFailed,
    sleep,
    start,
    step,
    workflow,
)
from querator.workflows.inspection import get_run

from .conftest import RunWorker
from .flows import CALLS, count_call


@step(name="d.lookup", retry=RetryPolicy(max_attempts=2, initial=0.01, jitter=False))
def lookup(key: str) -> str:
    count_call(f"lookup:{key}")
    return {"known": "yes"}[key]  # KeyError for any other key


@step(name="d.nothing", retry=RetryPolicy(max_attempts=5, initial=0.01, jitter=False))
def nothing(key: str) -> str:
    count_call(f"nothing:{key}")
    return None  # type: ignore[return-value]  # the bug under test: None for -> str


@workflow(name="d.order")
def order(key: str) -> str:
    return lookup(key)


@workflow(name="d.slow_order")
def slow_order(key: str) -> str:
    return lookup(key)


@workflow(name="d.empty")
def empty(key: str) -> str:
    return nothing(key)


def test_a_failed_step_keeps_its_traceback(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([order]):
        run = start(q, order, "missing")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    [step_info] = get_run(q, run.run_id).steps
    assert step_info.error_type == "KeyError"
    assert step_info.error_traceback is not None
    assert "Traceback (most recent call last)" in step_info.error_traceback
    assert 'return {"known": "yes"}[key]' in step_info.error_traceback
    assert CALLS["lookup:missing"] == 2  # retried, then given up


def test_a_result_that_cannot_be_stored_is_not_retried(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([empty]):
        run = start(q, empty, "e")
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=20)
    assert "ResultNotEncodable" in failed.value.message
    assert CALLS["nothing:e"] == 1  # a bug, not a transient failure


def test_an_idempotency_key_belongs_to_one_workflow(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([order]):
        first = start(q, order, "known", idempotency_key="k-1")
        assert first.result(timeout=20) == "yes"
    with pytest.raises(IdempotencyConflict) as conflict:
        start(q, slow_order, "known", idempotency_key="k-1")
    assert conflict.value.workflow == "d.order" and conflict.value.run_id == first.run_id
    assert start(q, order, "known", idempotency_key="k-1").run_id == first.run_id


def test_an_unknown_run_id_is_a_typed_error_at_once(q: Querator) -> None:
    start(q, order, "known")  # the store has runs, just not this one
    handle: RunHandle[str] = RunHandle(q, "run-no-such-run")
    with pytest.raises(RunNotFound):
        handle.result(timeout=30)  # at once, not after the timeout
    with pytest.raises(RunNotFound):
        handle.status()
    with pytest.raises(RunNotFound):
        get_run(q, "run-no-such-run")


@workflow(name="d.nap_nan")
def nap_nan(key: str) -> str:
    sleep(float("nan"))
    return key


@pytest.mark.parametrize("timeout", [float("nan"), -1.0, float("inf")])
def test_a_bad_result_timeout_is_refused_at_once(q: Querator, timeout: float) -> None:
    run = start(q, order, "known")
    with pytest.raises(InvalidArgument, match="timeout"):
        run.result(timeout=timeout)


def test_a_nan_sleep_fails_the_run_with_a_typed_error(q: Querator, run_worker: RunWorker) -> None:
    with pytest.raises(InvalidArgument, match="seconds"):
        sleep(float("nan"))  # outside a body too
    with run_worker([nap_nan]):
        run = start(q, nap_nan, "n")
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=20)
    assert failed.value.error_type == "InvalidArgument"
    assert "seconds" in failed.value.message
