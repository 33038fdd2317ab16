"""Live bodies: a run's body runs once and stays live between its steps;
replays happen on a miss only. Real worker processes (``live_worker.py``) on a
SQLite file and a PostgreSQL schema, each with default lease settings."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import RunHandle, WorkflowFailed, check_replay, start
from querator.workflows.keys import RESULTS_QUEUE, SLEEP_STEP, step_key
from querator.workflows.stored import StepRecord

from . import live_flows
from .conftest import RunWorker
from .ops_procs import WorkerProc, durable_url_for, read_log, spawn_worker

LIVE_WORKER = Path(__file__).with_name("live_worker.py")
FAILOVER = 15.0
"""Seconds within which a run continues on another worker after a SIGKILL, with
default settings (the issue's bound)."""


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _worker(url: str, name: str, log: Path, *options: str, **env: str) -> WorkerProc:
    return spawn_worker(url, name, log, *options, script=LIVE_WORKER, env=env)


def _counts(proc: WorkerProc) -> dict[str, int]:
    """The counts a stopped worker logged (``worker X stopped (a=1, b=2)``)."""
    found = re.search(r"worker \S+ stopped \(([^)]*)\)", proc.stderr())
    assert found is not None, proc.stderr()
    pairs = [part.split("=") for part in found.group(1).split(", ") if "=" in part]
    return {name: int(value) for name, value in pairs}


def _done(log: Path, key: str) -> Counter[int]:
    """How many times each position of ``key`` completed its side effect."""
    return Counter(p for verb, k, p, _ in read_log(log) if verb == "done" and k == key)


def test_a_5000_step_run_completes(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    n = 5000
    with Querator(durable_url) as q:
        run = start(q, live_flows.loop, "long", n)
        worker = _worker(durable_url, "w", log)
        try:
            assert run.result(timeout=240) == sum(range(n))
        finally:
            assert worker.terminate() == 0, worker.stderr()
    assert _done(log, "long") == Counter(range(n))  # every step ran once
    counts = _counts(worker)
    assert counts.get("replayed", 0) == 0  # one body, never replayed
    assert counts["handed_over"] == n  # the start wake and each step handed on the next


def test_a_killed_worker_is_replaced_within_seconds(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    n = 60
    with Querator(durable_url) as q:
        run = start(q, live_flows.loop, "kill", n)
        first = _worker(durable_url, "first", log, LIVE_STEP_SECONDS="0.1")
        second: WorkerProc | None = None
        try:
            wait_for(lambda: len(_done(log, "kill")) >= 10, timeout=60, message="10 steps")
            second = _worker(durable_url, "second", log, LIVE_STEP_SECONDS="0.1")
            wait_for(lambda: "serving" in second.stderr(), timeout=30, message="second serves")
            first.kill()
            killed_at = time.monotonic()
            wait_for(
                lambda: any(w == "second" for v, k, _, w in read_log(log) if v == "start"),
                timeout=FAILOVER + 15,
                message="the second worker takes the run over",
            )
            took = time.monotonic() - killed_at
            assert run.result(timeout=60) == sum(range(n))
        finally:
            first.kill()
            if second is not None:
                assert second.terminate() == 0, second.stderr()
    print(f"failover after SIGKILL: {took:.1f}s")
    assert took < FAILOVER
    done = _done(log, "kill")
    assert set(done) == set(range(n))
    twice = [p for p, count in done.items() if count > 1]
    # Only a step whose effect happened before the kill and whose commit did not
    # runs again: at most the one step in flight.
    print(f"steps run twice: {twice}")
    assert len(twice) <= 1
    assert _counts(second)["replayed"] >= 1  # the run was a miss on the second worker


def test_a_step_on_another_pool_resumes_the_live_body(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    with Querator(durable_url) as q:
        runs = [start(q, live_flows.hop, f"hop{i}") for i in range(3)]
        flows = _worker(durable_url, "flows", log)
        pool = _worker(durable_url, "pool", log, "--serve", "remote")
        try:
            for i, run in enumerate(runs):
                assert run.result(timeout=60) == ["0", f"hop{i}@pool", "2"]
        finally:
            assert flows.terminate() == 0, flows.stderr()
            assert pool.terminate() == 0, pool.stderr()
    for i in range(3):
        assert _done(log, f"hop{i}") == Counter({0: 1, 1: 1, 2: 1})
    counts = _counts(flows)
    assert counts["resumed"] == 3  # each body was live when the remote step's wake came
    assert counts.get("replayed", 0) == 0


def test_an_edited_workflow_fails_at_its_next_miss_and_the_check_says_so(
    durable_url: str, tmp_path: Path
) -> None:
    log, edited = tmp_path / "steps.log", tmp_path / "edited"
    env = {"LIVE_EDITED": str(edited)}
    with Querator(durable_url) as q:
        run = start(q, live_flows.editable, "e1", 3.0)
        old = _worker(durable_url, "old", log, **env)
        try:
            wait_for(lambda: _timer_stored(q, run), timeout=30, message="the run sleeps")
        finally:
            assert old.terminate() == 0, old.stderr()
        assert check_replay(q, run.run_id, [live_flows.editable]).ok  # the code it ran
        edited.touch()  # deploy: the body now calls live.first_v2 at position 0
        monkey = pytest.MonkeyPatch()
        monkey.setattr(live_flows, "EDITED", edited)
        try:
            report = check_replay(q, run.run_id, [live_flows.editable])
        finally:
            monkey.undo()
        assert not report.ok and report.position == 0
        assert (report.stored, report.called) == ("live.first", "live.first_v2")
        new = _worker(durable_url, "new", log, **env)  # restarted: the timer's wake misses
        try:
            with pytest.raises(WorkflowFailed) as failed:
                run.result(timeout=30)
        finally:
            assert new.terminate() == 0, new.stderr()
    assert failed.value.error_type == "NonDeterminism"
    assert "'live.first'" in failed.value.message and "'live.first_v2'" in failed.value.message


def _timer_stored(q: Querator, run: RunHandle[str]) -> bool:
    found = q.lookup(RESULTS_QUEUE, [step_key(run.run_id, 1)])
    item = found.get(step_key(run.run_id, 1))
    return item is not None and StepRecord.model_validate_json(item.payload).step == SLEEP_STEP


def test_few_live_bodies_many_runs_every_step_once(
    q: Querator, run_worker: RunWorker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``max_live_runs=2`` with 10 runs parked on timers between their steps: runs
    are evicted and replayed, and no step runs twice."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("OPS_LOG", str(log))
    with run_worker([live_flows.napping_loop], max_live_runs=2, concurrency=8) as worker:
        runs = [start(q, live_flows.napping_loop, f"few{i}", 5) for i in range(10)]
        for run in runs:
            assert run.result(timeout=60) == sum(2 * i for i in range(5))
    for i in range(10):
        assert _done(log, f"few{i}") == Counter(2 * j for j in range(5))  # each step once
    counts = worker.worker.counts
    assert counts["replayed"] > 0  # evicted bodies were replayed on their next wake
    assert worker.worker.engine.live.evicted > 0
    assert len(worker.worker.engine.live) == 0  # torn down at shutdown


def test_no_live_bodies_replays_at_every_step(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([live_flows.loop], max_live_runs=0) as worker:
        assert start(q, live_flows.loop, "none", 4).result(timeout=30) == 6
    assert worker.worker.counts["replayed"] >= 3
