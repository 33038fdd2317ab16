"""Eager start's crash safety: a caller SIGKILLed while it runs a run's steps
loses no completed step, and a worker process goes on with the run within the
usual failover bound, though it was idle before the run existed (it learns
of the caller's leases from the wakeup of the commit that stored the run).
Real processes on a SQLite file and a PostgreSQL schema."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import RunHandle, list_runs

from .ops_procs import WorkerProc, durable_url_for, read_log, spawn_worker

LIVE_WORKER = Path(__file__).with_name("live_worker.py")
EAGER_CALLER = Path(__file__).with_name("eager_caller.py")
FAILOVER = 15.0
"""Seconds within which a run continues on a worker after its caller's SIGKILL."""


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _done(log: Path, key: str) -> Counter[int]:
    """How many times each position of ``key`` completed its side effect."""
    return Counter(p for verb, k, p, _ in read_log(log) if verb == "done" and k == key)


def _ran_on(log: Path, key: str, name: str) -> bool:
    return any(v == "start" and k == key and w == name for v, k, _, w in read_log(log))


def test_a_killed_eager_caller_is_replaced_within_seconds(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    n = 40
    slow = {"LIVE_STEP_SECONDS": "0.1"}
    worker = spawn_worker(durable_url, "worker", log, script=LIVE_WORKER, env=slow)
    caller: WorkerProc | None = None
    try:
        wait_for(lambda: "serving" in worker.stderr(), timeout=30, message="the worker serves")
        caller = spawn_worker(
            durable_url, "caller", log, "kill", str(n), script=EAGER_CALLER, env=slow
        )
        wait_for(lambda: len(_done(log, "kill")) >= 10, timeout=60, message="10 steps")
        assert not _ran_on(log, "kill", "worker")  # the caller holds the run's items
        caller.kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: _ran_on(log, "kill", "worker"),
            timeout=FAILOVER + 15,
            message="the worker takes the run over",
        )
        took = time.monotonic() - killed_at
        with Querator(durable_url) as q:
            [info] = list_runs(q, workflow="live.loop")
            assert RunHandle(q, info.run_id).result(timeout=60) == sum(range(n))
    finally:
        if caller is not None:
            caller.kill()
        assert worker.terminate() == 0, worker.stderr()
    print(f"failover after the caller's SIGKILL: {took:.1f}s")
    assert took < FAILOVER
    done = _done(log, "kill")
    assert set(done) == set(range(n))
    # Only the step in flight at the kill may run twice (its effect happened,
    # its commit did not).
    assert len([p for p, count in done.items() if count > 1]) <= 1
