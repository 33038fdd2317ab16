"""Workflow workers killed with SIGKILL at random instants lose no run.

Real worker processes (``ops_worker.py``) serve 4-step runs from a SQLite file
or a PostgreSQL schema while the test kills and restarts them. Every run must
complete with the right result, every step record must come from a step that
ran, and a step runs again only when an earlier attempt's process died (or
lost its lease) before the step's commit: the duplicates are counted from the
steps' log lines and printed.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator, QueueSettings
from querator.workflows import RunHandle, start
from querator.workflows.keys import RESULTS_QUEUE, result_key, step_key
from querator.workflows.stored import StepRecord

from .ops_flows import CHAIN_LENGTH, WORK_QUEUE, chain, stalling
from .ops_procs import WorkerProc, durable_url_for, read_log, spawn_worker

RUNS = 30
WORKERS = 3
KILLS = 10
SHORT_LEASE = QueueSettings(lease_timeout=0.5, expire_timeout=3600.0)
LEASE_LOST = ("lost its lease", "lease lost", "result dropped")


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _all_finished(q: Querator, runs: list[RunHandle]) -> bool:
    keys = [result_key(run.run_id) for run in runs]
    return len(q.lookup(RESULTS_QUEUE, keys)) == len(keys)


def _chaos(url: str, q: Querator, runs: list[RunHandle], log: Path) -> list[WorkerProc]:
    """Kill and restart workers until every run finished; every process started."""
    rng = random.Random(11)
    procs = [spawn_worker(url, f"w{n}g0", log) for n in range(WORKERS)]
    everyone = list(procs)
    kills = 0
    deadline = time.monotonic() + 90
    try:
        while not _all_finished(q, runs):
            assert time.monotonic() < deadline, "runs did not finish in 90 s"
            time.sleep(rng.uniform(0.1, 0.4))  # pacing of the chaos, not a wait
            if kills < KILLS:
                slot = rng.randrange(WORKERS)
                procs[slot].kill()
                kills += 1
                procs[slot] = spawn_worker(url, f"w{slot}g{kills}", log)
                everyone.append(procs[slot])
    finally:
        for proc in procs:
            assert proc.terminate() == 0, proc.stderr()
    return everyone


def test_killed_workers_lose_no_run(durable_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    with Querator(durable_url) as q:
        q.create_queue(WORK_QUEUE, SHORT_LEASE)
        runs = [start(q, chain, f"c{n}", idempotency_key=f"c{n}") for n in range(RUNS)]
        everyone = _chaos(durable_url, q, runs, log)
        for run in runs:
            assert run.result(timeout=5) == [10 * i for i in range(CHAIN_LENGTH)]
        keys = [step_key(run.run_id, i) for run in runs for i in range(CHAIN_LENGTH)]
        assert len(q.lookup(RESULTS_QUEUE, keys)) == len(keys)
    survivors = {p.name for p in everyone[-WORKERS:]}
    killed = {p.name for p in everyone} - survivors
    lost = {p.name for p in everyone if any(s in p.stderr() for s in LEASE_LOST)}
    report = _duplicates(log, killed | lost)
    store = durable_url.split(":", maxsplit=1)[0]
    print(
        f"\n{store}: {len(killed)} kills, {RUNS * CHAIN_LENGTH} steps; "
        f"{report['reruns']} step re-runs: {report['after_done']} after the side effect "
        f"(killed between side effect and commit), {report['mid_step']} mid-step; "
        f"{len(lost - killed)} surviving process(es) lost a lease (slow renewal)"
    )


def _duplicates(log: Path, interrupted: set[str]) -> dict[str, int]:
    """Check the log against the rules; count re-runs of steps by kind."""
    starts: dict[tuple[str, int], list[str]] = defaultdict(list)
    dones: set[tuple[str, int, str]] = set()
    for verb, key, position, worker in read_log(log):
        if verb == "start":
            starts[key, position].append(worker)
        else:
            dones.add((key, position, worker))
    expected = {(f"c{n}", i) for n in range(RUNS) for i in range(CHAIN_LENGTH)}
    assert set(starts) == expected, "every stored step ran at least once, and only those"
    counts = {"reruns": 0, "after_done": 0, "mid_step": 0}
    for (key, position), workers in starts.items():
        extra = len(workers) - 1
        cut_short = [w for w in workers if w in interrupted]
        assert len(cut_short) >= extra, (
            f"step {key}@{position} ran {len(workers)} times ({workers}) but only "
            f"{cut_short} were interrupted before committing"
        )
        counts["reruns"] += extra
        if extra:
            done_first = sum((key, position, w) in dones for w in cut_short)
            counts["after_done"] += min(done_first, extra)
            counts["mid_step"] += extra - min(done_first, extra)
    return counts


def test_expired_lease_cannot_commit_a_stale_result(durable_url: str, tmp_path: Path) -> None:
    """The first worker freezes past its lease; the second re-leases, runs and
    commits; the first one's late result is dropped with a logged Conflict."""
    log, claim, gate = tmp_path / "steps.log", tmp_path / "claim", tmp_path / "gate"
    with Querator(durable_url) as q:
        q.create_queue(WORK_QUEUE, SHORT_LEASE)
        run = start(q, stalling, "s1", str(claim), str(gate))
        first = spawn_worker(
            durable_url, "first", log, "--concurrency", "1", "--maintenance", "3600"
        )
        second: WorkerProc | None = None
        try:
            wait_for(claim.exists, timeout=20, message="first runs the step")
            second = spawn_worker(durable_url, "second", log)
            assert run.result(timeout=30) == "stalled s1 on second"
            gate.touch()  # the first worker wakes up with an expired lease
            wait_for(
                lambda: "result dropped" in first.stderr(),
                timeout=20,
                message="the first worker's Conflict is logged",
            )
            found = q.lookup(RESULTS_QUEUE, [step_key(run.run_id, 0)])
            record = StepRecord.model_validate_json(found[step_key(run.run_id, 0)].payload)
            assert record.result == '"stalled s1 on second"'
            assert ("done", "s1", 0, "first") in read_log(log)  # it did finish, too late
        finally:
            gate.touch()
            assert first.terminate() == 0, first.stderr()
            if second is not None:
                assert second.terminate() == 0, second.stderr()
