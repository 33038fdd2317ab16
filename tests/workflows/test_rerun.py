"""Failed runs run again: resumed in place from their first failed step, or
forked into a new run that keeps the steps before a chosen one."""

from __future__ import annotations

import threading
import time

import pytest

from querator import Querator
from querator.errors import InvalidArgument, RequestTimeout
from querator.workflows import (
    RetryPolicy,
    RunHandle,
    RunNotFound,
    StepFailed,
    WorkflowCancelled,
    WorkflowFailed,
    emit_event,
    fork,
    gather,
    rerun,
    resume,
    start,
    step,
    wait_for_event,
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


@workflow(name="r.child")
def child_flow(key: str) -> str:
    return fragile(key)


@workflow(name="r.timed-child", timeout=600)
def timed_child(key: str) -> str:
    return fragile(key)


@workflow(name="r.parent")
def parent_flow(key: str) -> list[str]:
    if key.startswith("timed"):
        return [first(key), timed_child(key), last(key)]
    return [first(key), child_flow(key), last(key)]


def test_a_run_whose_child_failed_resumes_to_completion(q: Querator, run_worker: RunWorker) -> None:
    """The child ended (failed) and its outcome record in the parent is removed by
    the resume: the child is resumed with its parent, which waits for its new end."""
    BROKEN.add("kc")
    with run_worker([parent_flow, child_flow, timed_child]):
        run = start(q, parent_flow, "kc")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
        [child] = [r for r in list_runs(q, workflow="r.child")]
        assert child.status == "failed" and child.parent_run_id == run.run_id
        BROKEN.discard("kc")
        assert resume(q, run.run_id) is True
        assert run.result(timeout=20) == ["first kc", "fragile kc", "last kc"]
    assert get_run(q, child.run_id).status == "completed"
    assert (CALLS["first:kc"], CALLS["fragile:kc"], CALLS["last:kc"]) == (1, 2, 1)
    assert list_runs(q, status="failed") == []


@pytest.mark.parametrize("key", ["kd", "timed-kd"])
def test_a_child_that_ended_gives_its_outcome_to_a_replayed_parent(
    q: Querator, run_worker: RunWorker, key: str
) -> None:
    """A parent that reaches a child which already ended (its record in the parent
    removed, as a resume does) takes the child's stored outcome instead of waiting."""
    BROKEN.add(key)
    with run_worker([parent_flow, child_flow, timed_child]):
        run = start(q, parent_flow, key)
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    [child] = [r for r in list_runs(q, status="failed") if r.parent_run_id]
    BROKEN.discard(key)
    assert resume(q, child.run_id) is True  # the child alone, by hand
    with run_worker([parent_flow, child_flow, timed_child]):
        assert RunHandle(q, child.run_id).result(timeout=20) == f"fragile {key}"
        assert resume(q, run.run_id) is True  # its record of the child is removed
        assert run.result(timeout=20) == [f"first {key}", f"fragile {key}", f"last {key}"]
    assert CALLS[f"fragile:{key}"] == 2  # the child's outcome was taken, not run again


@workflow(name="r.ok-child")
def ok_child(key: str) -> str:
    return last(f"child-{key}")


@workflow(name="r.tolerant")
def tolerant(key: str) -> list[str]:
    """A failed step is caught, a child runs to its end, then the run fails: the
    first failed position is before the child's, so a resume removes the parent's
    record of a child that completed."""
    try:
        got = fragile(key)
    except StepFailed:
        got = "caught"
    done = ok_child(key)
    if got == "caught":
        raise RuntimeError(f"{key}: fragile failed")
    return [got, done]


def test_a_resume_past_a_child_that_completed_takes_its_outcome(
    q: Querator, run_worker: RunWorker
) -> None:
    """The child completed after the failed position: the resume removes the parent's
    record of it; the replayed parent takes the child's stored outcome (the child
    is not run again) and completes."""
    BROKEN.add("ke")
    with run_worker([tolerant, ok_child]):
        run = start(q, tolerant, "ke")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
        [child] = list_runs(q, workflow="r.ok-child")
        assert child.status == "completed" and child.parent_run_id == run.run_id
        BROKEN.discard("ke")
        assert resume(q, run.run_id) is True
        assert run.result(timeout=20) == ["fragile ke", "last child-ke"]
    assert (CALLS["fragile:ke"], CALLS["last:child-ke"]) == (2, 1)
    assert get_run(q, child.run_id).status == "completed"


@workflow(name="r.gathered")
def gathered(key: str) -> list[str]:
    """A failing step and a child gathered together: the gather raises once the
    child has ended, so the run fails at the step's position, before the child's."""
    return list(gather([fragile.spawn(key), ok_child.spawn(key)]))


def test_a_resume_of_a_failed_gather_takes_its_ended_childs_outcome(
    q: Querator, run_worker: RunWorker
) -> None:
    """The gather's step failed and its child completed: the resume removes the
    parent's records from the step's position on (the child's outcome too); the
    replayed gather starts the step again and takes the child's stored outcome
    (the child is not run again)."""
    BROKEN.add("kg")
    with run_worker([gathered, ok_child]):
        run = start(q, gathered, "kg")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
        [child] = list_runs(q, workflow="r.ok-child")
        assert child.status == "completed" and child.parent_run_id == run.run_id
        BROKEN.discard("kg")
        assert resume(q, run.run_id) is True
        assert run.result(timeout=20) == ["fragile kg", "last child-kg"]
    assert (CALLS["fragile:kg"], CALLS["last:child-kg"]) == (2, 1)


@workflow(name="r.waiting-child")
def waiting_child(key: str) -> str:
    wait_for_event(f"r-go-{key}")
    return last(f"child-{key}")


@workflow(name="r.waiting-parent")
def waiting_parent(key: str) -> list[str]:
    return [first(key), waiting_child(key)]


def test_a_resumed_cancelled_parent_resumes_the_child_its_end_cancelled(
    q: Querator, run_worker: RunWorker
) -> None:
    """The parent is cancelled while its child waits; its end cancels the child
    (parent-close policy), whose end writes the parent's record of it. Resuming
    the parent resumes that child too, and both complete once the child's event
    comes: the child's cancelled outcome is not taken as its final one."""
    with run_worker([waiting_parent, waiting_child]):
        run = start(q, waiting_parent, "kw")
        child = RunHandle(q, "")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            children = get_run(q, run.run_id).children
            if children and children[0].status == "running":
                child = RunHandle(q, children[0].run_id)
                break
            time.sleep(0.05)
        assert child.run_id, "the child never started"
        assert run.cancel() is True
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=20)
        with pytest.raises(WorkflowCancelled):
            child.result(timeout=20)
        assert resume(q, run.run_id) is True
        assert get_run(q, child.run_id).status == "running"
        emit_event(q, "r-go-kw", None)
        assert run.result(timeout=20) == ["first kw", "last child-kw"]
    assert CALLS["last:child-kw"] == 1


@workflow(name="r.far-child", queue="r-far-children")
def far_child(key: str) -> str:
    wait_for_event(f"r-go-{key}")
    return last(f"child-{key}")


@workflow(name="r.far-parent")
def far_parent(key: str) -> list[str]:
    return [first(key), far_child(key)]


def _cancelled_with_a_child_ending(
    q: Querator, run_worker: RunWorker, key: str
) -> tuple[RunHandle[list[str]], RunHandle[object]]:
    """A ``r.far-parent`` run cancelled while its child waits; the child's worker
    is stopped, so the child's cancel (from its parent's end) is still pending."""
    with run_worker([far_parent, far_child]):
        run = start(q, far_parent, key)
        deadline = time.monotonic() + 20
        while not get_run(q, run.run_id).children and time.monotonic() < deadline:
            time.sleep(0.05)
        [child] = get_run(q, run.run_id).children
        while get_run(q, child.run_id).status != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
    with run_worker([far_parent]):  # the parent's queue only
        assert run.cancel() is True
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=20)
    assert get_run(q, child.run_id).status == "running"  # its cancel waits for a worker
    return run, RunHandle(q, child.run_id)


def test_a_resume_right_after_a_cancel_waits_for_the_child_the_end_cancels(
    q: Querator, run_worker: RunWorker
) -> None:
    """Resumed before its child has ended (the child's cancel still pending), the
    parent waits for that end and resumes the child with it: both complete
    (before: the replayed parent took the child's cancelled outcome and failed)."""
    run, child = _cancelled_with_a_child_ending(q, run_worker, "kz")
    resumed: list[bool] = []
    resumer = threading.Thread(target=lambda: resumed.append(resume(q, run.run_id)))
    resumer.start()
    with run_worker([far_parent, far_child]):
        resumer.join(timeout=30)
        assert resumed == [True]
        assert get_run(q, child.run_id).status == "running"  # resumed with its parent
        emit_event(q, "r-go-kz", None)
        assert run.result(timeout=20) == ["first kz", "last child-kz"]


def test_a_resume_refuses_while_a_child_the_end_cancels_does_not_end(
    q: Querator, run_worker: RunWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rerun, "CHILD_END_WAIT", 0.3)
    run, _ = _cancelled_with_a_child_ending(q, run_worker, "ky")
    with pytest.raises(RequestTimeout, match="is still ending"):
        resume(q, run.run_id)
    assert get_run(q, run.run_id).status == "cancelled"  # nothing written
