"""Fan-out (spawn / gather) and child workflows."""

from __future__ import annotations

import threading

import pytest

from querator import Querator
from querator.workflows import (
    RetryPolicy,
    RunHandle,
    StepFailed,
    WorkflowFailed,
    gather,
    gather_async,
    start,
    step,
    workflow,
)
from querator.workflows.keys import child_run_id

from .conftest import RunWorker
from .flows import CALLS, count_call

_barrier = threading.Barrier(2, timeout=10)


@pytest.fixture(autouse=True)
def _reset() -> None:
    _barrier.reset()


@step(name="e.triple", retry=RetryPolicy(max_attempts=3, initial=0.01, max_delay=0.02))
def triple(x: int) -> int:
    count_call(f"triple:{x}")
    if x < 0:
        raise ValueError(f"negative {x}")
    return 3 * x


@step(name="e.atriple")
async def atriple(x: int) -> int:
    count_call(f"atriple:{x}")
    return 3 * x


@step(name="e.meet", retry=RetryPolicy(max_attempts=1))
def meet(key: str) -> str:
    _barrier.wait()  # both members must be running at once, or this breaks
    return f"met:{key}"


@workflow(name="e.fan")
def fan(xs: list[int]) -> list[int]:
    handles = [triple.spawn(x) for x in xs]
    return [*gather(handles), triple(100)]


@workflow(name="e.afan")
async def afan(xs: list[int]) -> list[int]:
    return await gather_async([atriple.spawn(x) for x in xs])


@workflow(name="e.fan_catch")
def fan_catch(xs: list[int]) -> str:
    try:
        gather([triple.spawn(x) for x in xs])
    except StepFailed as exc:
        return f"{exc.position}:{exc.message}"
    return "no failure"


@workflow(name="e.meeting")
def meeting() -> list[str]:
    return gather([meet.spawn("a"), meet.spawn("b")])


@workflow(name="e.child")
def child(x: int) -> int:
    return triple(x) + 1


@workflow(name="e.parent")
def parent(x: int) -> list[int]:
    first = triple(x)
    return [first, child(first), child(x)]


@workflow(name="e.parent_plain")
def parent_plain(x: int) -> int:
    return child(x)


@workflow(name="e.parent_catch")
def parent_catch(x: int) -> str:
    try:
        return str(child(x))
    except StepFailed as exc:
        return f"child failed: {exc.error_type}: {exc.message}"


FUNCTIONS = [
    fan,
    afan,
    fan_catch,
    meeting,
    child,
    parent,
    parent_plain,
    parent_catch,
    triple,
    atriple,
    meet,
]


def test_gather_returns_results_in_spawn_order(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FUNCTIONS, concurrency=4):
        run = start(q, fan, [5, 1, 3, 2])
        assert run.result(timeout=20) == [15, 3, 9, 6, 300]
    assert all(CALLS[f"triple:{x}"] == 1 for x in (5, 1, 3, 2, 100))


def test_gathered_steps_run_in_parallel(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FUNCTIONS, concurrency=4):
        run = start(q, meeting)
        assert run.result(timeout=30) == ["met:a", "met:b"]


def test_async_gather(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FUNCTIONS, concurrency=4):
        run = start(q, afan, [1, 2, 3])
        assert run.result(timeout=20) == [3, 6, 9]


def test_a_failed_member_raises_at_gather_after_all_ended(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(FUNCTIONS, concurrency=4):
        run = start(q, fan_catch, [1, -2, 3, -4])
        assert run.result(timeout=30) == "1:negative -2"
    assert CALLS["triple:1"] == 1 and CALLS["triple:3"] == 1
    assert CALLS["triple:-2"] == 3 and CALLS["triple:-4"] == 3  # default policy: 3 attempts


def test_gather_outside_a_workflow_runs_inline() -> None:
    assert gather([triple.spawn(2), triple.spawn(3)]) == [6, 9]


def test_child_workflows_return_their_results(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FUNCTIONS):
        run = start(q, parent, 2)
        assert run.result(timeout=30) == [6, 19, 7]
    assert RunHandle(q, child_run_id(run.run_id, 1)).status() == "completed"
    assert RunHandle(q, child_run_id(run.run_id, 1)).result(timeout=1) == 19
    assert CALLS["triple:2"] == 2  # once in the parent, once in the second child


def test_a_failing_child_raises_step_failed_in_the_parent(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(FUNCTIONS):
        caught = start(q, parent_catch, -1)
        assert caught.result(timeout=30).startswith("child failed: StepFailed")
        failing = start(q, parent_plain, -1)
        with pytest.raises(WorkflowFailed) as failed:
            failing.result(timeout=30)
    assert failed.value.error_type == "StepFailed"
    assert "'e.child'" in failed.value.message and "negative -1" in failed.value.message
    assert RunHandle(q, child_run_id(caught.run_id, 0)).status() == "failed"


def test_gather_wider_than_one_lookup_window(q: Querator, run_worker: RunWorker) -> None:
    xs = list(range(70))  # past the first windows of a history load; members finish out of order
    with run_worker(FUNCTIONS, concurrency=8):
        run = start(q, fan, xs)
        assert run.result(timeout=60) == [3 * x for x in xs] + [300]
    assert all(CALLS[f"triple:{x}"] == 1 for x in xs)
