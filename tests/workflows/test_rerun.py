"""Failed runs run again: resumed in place from their first failed step, or
forked into a new run that keeps the steps before a chosen one."""

from __future__ import annotations

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    RetryPolicy,
    RunNotFound,
    WorkflowFailed,
    fork,
    resume,
    start,
    step,
    workflow,
)
from querator.workflows.inspection import get_run, list_runs

from .conftest import RunWorker
from .flows import CALLS, count_call

BROKEN: set[str] = set()
"""Keys whose ``r.fragile`` step fails (the test "fixes the bug" by removing them)."""


@step(name="r.first")
def first(key: str) -> str:
    count_call(f"first:{key}")
    return f"first {key}"


@step(name="r.fragile", retry=RetryPolicy(max_attempts=1))
def fragile(key: str) -> str:
    count_call(f"fragile:{key}")
    if key in BROKEN:
        raise RuntimeError(f"{key} is broken")
    return f"fragile {key}"


@step(name="r.last")
def last(key: str) -> str:
    count_call(f"last:{key}")
    return f"last {key}"


@workflow(name="r.pipeline")
def pipeline(key: str) -> list[str]:
    return [first(key), fragile(key), last(key)]


@pytest.fixture(autouse=True)
def _no_broken_keys() -> None:
    BROKEN.clear()


def test_a_failed_run_resumes_from_its_failed_step(q: Querator, run_worker: RunWorker) -> None:
    BROKEN.add("k1")
    with run_worker([pipeline]):
        run = start(q, pipeline, "k1")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    assert [r.run_id for r in list_runs(q, status="failed")] == [run.run_id]
    assert resume(q, run.run_id) is True  # not fixed yet: it will fail again
    assert run.status() == "running"  # at once, before any worker acted on it
    assert [r.run_id for r in list_runs(q, status="running")] == [run.run_id]
    assert list_runs(q, status="failed") == []
    with run_worker([pipeline]):
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
        BROKEN.discard("k1")  # the fix is deployed
        assert resume(q, run.run_id) is True
        assert run.result(timeout=20) == ["first k1", "fragile k1", "last k1"]
    assert run.status() == "completed"
    assert [r.run_id for r in list_runs(q, status="completed")] == [run.run_id]
    assert list_runs(q, status="running") == list_runs(q, status="failed") == []
    assert CALLS["first:k1"] == 1  # kept its stored result through both resumes
    assert (CALLS["fragile:k1"], CALLS["last:k1"]) == (3, 1)
    assert [s.step for s in get_run(q, run.run_id).steps] == ["r.first", "r.fragile", "r.last"]
    assert resume(q, run.run_id) is False  # completed: nothing to resume


def test_a_run_is_forked_from_a_chosen_step(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([pipeline]):
        run = start(q, pipeline, "k2")
        assert run.result(timeout=20) == ["first k2", "fragile k2", "last k2"]
        again = fork(q, run.run_id, 2)
        assert again.run_id != run.run_id
        assert again.result(timeout=20) == ["first k2", "fragile k2", "last k2"]
    assert (CALLS["first:k2"], CALLS["fragile:k2"], CALLS["last:k2"]) == (1, 1, 2)
    with pytest.raises(InvalidArgument, match="from_step"):
        fork(q, run.run_id, 9)


def test_rerunning_an_unknown_run_is_a_typed_error(q: Querator) -> None:
    start(q, pipeline, "other")
    with pytest.raises(RunNotFound):
        resume(q, "run-nope")
    with pytest.raises(RunNotFound):
        fork(q, "run-nope", 0)
