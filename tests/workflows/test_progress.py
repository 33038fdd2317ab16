"""report_progress: a running step's progress, visible while it runs and after."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from cli_forks import run_cli
from polling import wait_for

from querator import Querator
from querator.errors import InvalidArgument, UsageError
from querator.workflows import report_progress, report_progress_async, start, step, workflow
from querator.workflows.inspection import RunInfo, get_run

from .conftest import RunWorker

GATES: dict[str, threading.Event] = {}


@contextmanager
def _opened(key: str) -> Iterator[None]:
    """Open the gate at the end, whatever happened (so the worker can stop)."""
    try:
        yield
    finally:
        GATES[key].set()


@step(name="p.count")
def count(key: str, total: int) -> int:
    for done in range(1, total + 1):
        report_progress({"done": done, "of": total})
    GATES[key].wait(timeout=30)  # held until the test has seen the progress
    return total


@step(name="p.acount")
async def acount(key: str) -> str:
    await report_progress_async({"phase": "async", "key": key})
    while not GATES[key].is_set():
        await anyio.sleep(0.01)
    return key


@workflow(name="p.flow")
def flow(key: str) -> int:
    return count(key, 3)


@workflow(name="p.aflow")
async def aflow(key: str) -> str:
    return await acount(key)


def test_progress_is_visible_while_the_step_runs_and_kept_after(
    q: Querator, run_worker: RunWorker, backend_url: str
) -> None:
    GATES["k1"] = threading.Event()
    with run_worker([flow, count]), _opened("k1"):
        run = start(q, flow, "k1")
        seen: list[dict[str, int]] = []

        def reported_all() -> bool:
            running = get_run(q, run.run_id).progress
            seen.extend(p.progress for p in running)
            return any(p.progress == {"done": 3, "of": 3} for p in running)

        wait_for(reported_all, timeout=20, message="the last progress")
        detail = get_run(q, run.run_id)
        [shown] = detail.progress
        assert (shown.position, shown.attempt, shown.progress) == (0, 1, {"done": 3, "of": 3})
        assert [p.position for p in detail.pending] == [0]  # the call itself
        with pytest.warns(DeprecationWarning, match="use RunInfo.progress"):
            assert detail.in_progress == detail.progress  # the old name, for a while
        assert all(p["of"] == 3 and 1 <= p["done"] <= 3 for p in seen)
        if backend_url != "memory://":  # the CLI is another process
            command = ["runs", "show", run.run_id, "--url", backend_url]
            out = run_cli(*command)
            assert "pending:" in out.stdout and "in progress" not in out.stdout, out.stderr
            assert '{"done":3,"of":3}' in out.stdout
        GATES["k1"].set()
        assert run.result(timeout=20) == 3
    detail = get_run(q, run.run_id)
    assert detail.progress == ()
    [ended] = detail.steps
    assert ended.progress is not None and ended.progress.progress == {"done": 3, "of": 3}


def test_async_steps_report_with_areport_progress(q: Querator, run_worker: RunWorker) -> None:
    GATES["k2"] = threading.Event()
    with run_worker([aflow, acount]), _opened("k2"):
        run = start(q, aflow, "k2")
        wait_for(lambda: get_run(q, run.run_id).progress, timeout=20, message="progress")
        [shown] = get_run(q, run.run_id).progress
        assert shown.progress == {"phase": "async", "key": "k2"}
        GATES["k2"].set()
        assert run.result(timeout=20) == "k2"


def test_outside_a_step_and_bad_reports_are_refused() -> None:
    with pytest.raises(UsageError, match="inside a step"):
        report_progress({"done": 1})
    with pytest.raises(UsageError, match="inside a step"):
        anyio.run(report_progress_async, {"done": 1})


def test_bad_progress_fails_the_attempt_with_a_clear_error(
    q: Querator, run_worker: RunWorker
) -> None:
    from querator.workflows import RetryPolicy, WorkflowFailed

    @step(name="p.bad", retry=RetryPolicy(max_attempts=1))
    def bad() -> None:
        report_progress({"when": object()})

    @workflow(name="p.badflow")
    def badflow() -> None:
        bad()

    with run_worker([badflow, bad]):
        run = start(q, badflow)
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=20)
    assert failed.value.error_type == "StepFailed"
    assert InvalidArgument.__name__ in str(failed.value)
    assert "progress" in str(failed.value) and "JSON" in str(failed.value)


def test_a_run_detail_from_an_older_server_keeps_its_progress() -> None:
    """JSON written before the rename (key ``in_progress``) reads into ``progress``."""
    report = {"position": 0, "attempt": 1, "updated_at": "2026-11-25T00:00:00Z", "progress": {}}
    old = {
        "run_id": "r", "workflow": "w", "status": "running", "queue": "q",
        "started_at": "2026-11-25T00:00:00Z", "args": "{}", "in_progress": [report],
    }  # fmt: skip
    info = RunInfo.model_validate(old)
    assert [p.position for p in info.progress] == [0]
    assert info.model_dump(mode="json")["in_progress"] == info.model_dump(mode="json")["progress"]
