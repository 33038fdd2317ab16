"""Child runs spawned and gathered in parallel (``child.spawn`` beside step
handles), on in-process workers and on real worker processes."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import (
    ChildHandle,
    RunHandle,
    WorkflowCancelled,
    gather,
    get_run,
    send,
    start,
)
from querator.workflows.inspection import ChildInfo
from querator.workflows.keys import child_run_id

from . import lifecycle_flows as kids
from .conftest import RunWorker
from .ops_procs import WorkerProc, durable_url_for, read_log, spawn_worker

LIFECYCLE_WORKER = Path(__file__).with_name("lifecycle_worker.py")


def test_children_and_steps_gathered_in_order(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        run = start(q, kids.mixed, "m")
        assert run.result(timeout=30) == [11, 20, 31, 41]
    # positions 0 and 2 are the gathered children, 3 the plain call
    for position in (0, 2, 3):
        assert RunHandle(q, child_run_id(run.run_id, position)).status() == "completed"


def test_async_children_gathered(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        assert start(q, kids.abrood, 4).result(timeout=30) == [0, 2, 4, 6]


def test_a_failing_child_raises_at_gather_as_a_step_would(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        run = start(q, kids.catch, "c")
        assert run.result(timeout=30) == "kids.child@1: StepFailed"
    assert RunHandle(q, child_run_id(run.run_id, 0)).status() == "completed"
    assert RunHandle(q, child_run_id(run.run_id, 1)).status() == "failed"


def test_spawn_outside_a_workflow_runs_inline() -> None:
    handles = [kids.kid.spawn("inline", 1), kids.work.spawn("inline", 2)]
    assert isinstance(handles[0], ChildHandle) and handles[0].run_id == ""
    assert gather(handles) == [11, 20]


# -- real worker processes ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _workers(url: str, log: Path, seconds: float) -> list[WorkerProc]:
    env = {"KIDS_STEP_SECONDS": str(seconds)}
    return [
        spawn_worker(url, f"w{i}", log, "--concurrency", "16", script=LIFECYCLE_WORKER, env=env)
        for i in range(2)
    ]


def _done(log: Path, key: str) -> Counter[int]:
    return Counter(p for verb, k, p, _ in read_log(log) if verb == "done" and k == key)


def test_twenty_children_run_in_parallel_on_two_processes(durable_url: str, tmp_path: Path) -> None:
    """20 children spawned and gathered by one parent on 2 worker processes
    finish in about one child's time (each step takes 1 s), each once."""
    log, seconds, n = tmp_path / "kids.log", 1.0, 20
    with Querator(durable_url) as q:
        workers = _workers(durable_url, log, seconds)
        try:
            assert start(q, kids.kid, "warm", 7).result(timeout=60) == 71  # queues made
            began = time.monotonic()
            assert start(q, kids.kid, "one", 7).result(timeout=60) == 71
            one = time.monotonic() - began
            began = time.monotonic()
            run = start(q, kids.brood, "many", n)
            assert run.result(timeout=120) == [10 * i + 1 for i in range(n)]
            many = time.monotonic() - began
        finally:
            for worker in workers:
                assert worker.terminate() == 0, worker.stderr()
    print(f"one child: {one:.2f}s; {n} children gathered: {many:.2f}s")
    assert _done(log, "many") == Counter(range(n))  # every child's step ran once
    ran_on = {w for verb, k, _, w in read_log(log) if verb == "done" and k == "many"}
    assert ran_on == {"w0", "w1"}
    assert many < n * seconds / 4  # in parallel: serially it would take 20 s
    assert many < one + 2.0  # near one child's time


# -- the parent's end and its running children ------------------------------------


def _children_started(q: Querator, run_id: str, n: int) -> list[ChildInfo]:
    def started() -> list[ChildInfo] | None:
        children = list(get_run(q, run_id).children)
        return children if len(children) == n else None

    children = wait_for(started, timeout=30, message=f"{n} children started")
    assert [c.position for c in children] == list(range(n))
    return children


def _statuses(q: Querator, children: list[ChildInfo]) -> list[str]:
    return [RunHandle(q, c.run_id).status() for c in children]


def test_a_cancelled_parent_cancels_its_running_children(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        run = start(q, kids.parent, "cancel", 3, "cancel")
        children = _children_started(q, run.run_id, 3)
        assert {c.parent_close_policy for c in children} == {"cancel"}
        assert run.cancel("enough")
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=30)
        wait_for(
            lambda: _statuses(q, children) == ["cancelled"] * 3,
            timeout=30,
            message="children cancelled",
        )
    shown = get_run(q, run.run_id).children
    assert [c.status for c in shown] == ["cancelled"] * 3
    child = get_run(q, children[0].run_id)
    assert child.parent_run_id == run.run_id
    assert child.error_message == f"parent run {run.run_id} ended cancelled"


def test_abandoned_children_run_on(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        run = start(q, kids.parent, "abandon", 2, "abandon")
        children = _children_started(q, run.run_id, 2)
        run.cancel()
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=30)
        assert _statuses(q, children) == ["running"] * 2
        for c in children:
            send(q, c.run_id, "go", c.position)
        assert [RunHandle(q, c.run_id).result(timeout=30) for c in children] == ["0", "1"]


def test_a_parent_waits_for_its_wait_children_before_it_ends(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(kids.FLOWS, concurrency=8):
        run = start(q, kids.parent, "wait", 2, "wait")
        children = _children_started(q, run.run_id, 2)
        run.cancel()
        send(q, children[0].run_id, "go", 0)
        assert RunHandle(q, children[0].run_id).result(timeout=30) == "0"
        # cancelled, but not ended: one child still runs
        assert run.status() == "running" and get_run(q, run.run_id).cancel_requested
        send(q, children[1].run_id, "go", 1)
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=30)
    assert _statuses(q, children) == ["completed"] * 2


def test_a_parent_cancelled_mid_way_cancels_its_children_on_two_processes(
    durable_url: str, tmp_path: Path
) -> None:
    log, n = tmp_path / "kids.log", 10
    with Querator(durable_url) as q:
        workers = _workers(durable_url, log, 0.0)
        try:
            run = start(q, kids.parent, "mid", n, "cancel")
            children = _children_started(q, run.run_id, n)
            wait_for(lambda: len(_started(log, "mid")) == n, timeout=30, message="bodies ran")
            assert run.cancel("mid-way")
            with pytest.raises(WorkflowCancelled):
                run.result(timeout=30)
            wait_for(
                lambda: _statuses(q, children) == ["cancelled"] * n,
                timeout=30,
                message="children cancelled",
            )
        finally:
            for worker in workers:
                assert worker.terminate() == 0, worker.stderr()


def _started(log: Path, key: str) -> set[int]:
    return {p for verb, k, p, _ in read_log(log) if verb == "start" and k == key}
