"""The published step context: a long step learns that its run was cancelled,
or that its run's deadline is near, and stops early."""

from __future__ import annotations

import threading
import time

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import (
    WorkflowCancelled,
    current_step,
    start,
    step,
    workflow,
)
from querator.workflows.inspection import get_run

from .conftest import RunWorker

SEEN: dict[str, object] = {}
STARTED: dict[str, threading.Event] = {}


@step(name="sc.long", retry=None)
def long_step(key: str) -> str:
    ctx = current_step()
    assert ctx is not None
    SEEN[f"{key}:where"] = (ctx.step, ctx.position, ctx.attempt, ctx.compensation)
    SEEN[f"{key}:deadline"] = ctx.run_deadline()
    STARTED[key].set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reason = ctx.stop_reason()
        if reason is not None:
            SEEN[f"{key}:stopped"] = str(reason)
            raise reason
        time.sleep(0.05)
    return "ran to its end"


@workflow(name="sc.flow", timeout=3600)
def flow(key: str) -> str:
    return long_step(key)


def test_a_step_sees_its_context_and_stops_when_its_run_is_cancelled(
    q: Querator, run_worker: RunWorker
) -> None:
    assert current_step() is None  # outside a step
    STARTED["c1"] = threading.Event()
    with run_worker([flow]):
        run = start(q, flow, "c1")
        assert STARTED["c1"].wait(20)
        assert run.cancel("enough")
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=20)
    assert SEEN["c1:where"] == ("sc.long", 0, 1, False)
    deadline = SEEN["c1:deadline"]
    assert deadline is not None and deadline == get_run(q, run.run_id).deadline
    assert "sc.long" in str(wait_for(lambda: SEEN.get("c1:stopped"), timeout=20))
