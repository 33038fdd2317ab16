"""Continue-as-new: a run ends by starting its successor with a fresh history,
in one transaction; on in-process workers and on worker processes killed
during the hand-over."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.errors import UsageError
from querator.workflows import RunInfo, continue_as_new, get_run, list_runs, start
from querator.workflows.engine.successor import successor_id
from querator.workflows.keys import RESULTS_QUEUE

from . import lifecycle_flows as flows
from .conftest import RunWorker
from .ops_procs import WorkerProc, durable_url_for, read_log, spawn_worker

LIFECYCLE_WORKER = Path(__file__).with_name("lifecycle_worker.py")


def _chain(q: Querator, run_id: str) -> list[RunInfo]:
    """The runs from ``run_id`` along ``continued_as``, in order."""
    runs = [get_run(q, run_id)]
    while runs[-1].continued_as is not None:
        runs.append(get_run(q, runs[-1].continued_as))
    return runs


def _records(q: Querator, run_id: str) -> int:
    """How many records run ``run_id`` keeps in the results queue (its history)."""
    return len(q.scan_keys(RESULTS_QUEUE, f"{run_id}/", limit=1000))


def test_a_run_continues_as_new_with_a_fresh_history(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(flows.FLOWS):
        run = start(q, flows.count, "c", 5, 0)
        assert run.result(timeout=30) == 15  # result() follows the chain
    chain = _chain(q, run.run_id)
    assert len(chain) == 6
    assert [r.status for r in chain] == ["completed"] * 6
    assert all(len(r.steps) == 1 for r in chain)  # one step each: a fresh history
    assert chain[1].run_id == successor_id(run.run_id)
    assert [r.continued_from for r in chain] == [None] + [r.run_id for r in chain[:-1]]
    assert chain[-1].result == "15" and chain[0].result == "null"
    first, second = '{"key":"c","left":5,"total":0}', '{"key":"c","left":4,"total":5}'
    assert [r.args for r in chain[:2]] == [first, second]


def test_async_bodies_and_children_continue_as_new(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(flows.FLOWS):
        assert start(q, flows.acount, 10, 0).result(timeout=30) == 55
        parent = start(q, flows.chain_parent, 3)
        assert parent.result(timeout=30) == 6  # the child's last run reported to it
    assert [len(r.steps) for r in _chain(q, parent.run_id)] == [1]


def test_continue_as_new_outside_a_workflow_body_is_refused() -> None:
    with pytest.raises(UsageError, match="inside a workflow body"):
        continue_as_new(1)


def test_a_thousand_continuations_keep_a_bounded_history(
    q: Querator, run_worker: RunWorker, backend_name: str
) -> None:
    if backend_name == "memory":
        pytest.skip("the size is what a durable store keeps")
    n = 1000
    began = time.monotonic()
    with run_worker(flows.FLOWS):
        run = start(q, flows.count, "k", n, 0)
        assert run.result(timeout=240) == n * (n + 1) // 2
    took = time.monotonic() - began
    chain = _chain(q, run.run_id)
    assert len(chain) == n + 1
    sizes = Counter(_records(q, r.run_id) for r in (chain[0], chain[n // 2], chain[-1]))
    print(f"{n} continuations in {took:.1f}s; records under {{run}}/ (first, middle, last run):")
    print(dict(sizes))
    assert max(sizes) <= 3  # meta, result, the step's record: not n


# -- worker processes killed during the hand-over ----------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _worker(url: str, name: str, log: Path) -> WorkerProc:
    env = {"KIDS_STEP_SECONDS": "0.005"}
    return spawn_worker(url, name, log, script=LIFECYCLE_WORKER, env=env)


def _done(log: Path) -> Counter[int]:
    return Counter(p for verb, k, p, _ in read_log(log) if verb == "done" and k == "kill")


def _wait_done(log: Path, runs: int) -> None:
    wait_for(lambda: len(_done(log)) >= runs, timeout=120, message=f"{runs} runs")


def test_sigkill_during_hand_overs_loses_nothing_and_starts_one_successor(
    durable_url: str, tmp_path: Path
) -> None:
    log, n = tmp_path / "chain.log", 150
    with Querator(durable_url) as q:
        workers = [_worker(durable_url, "w0", log), _worker(durable_url, "w1", log)]
        try:
            run = start(q, flows.count, "kill", n, 0)
            for victim, after in ((0, 30), (1, 90)):  # each worker killed once, mid-chain
                _wait_done(log, after)
                workers[victim].kill()
                workers.append(_worker(durable_url, f"w{len(workers)}", log))
            assert run.result(timeout=180) == n * (n + 1) // 2
        finally:
            for worker in workers[:2]:
                worker.kill()  # killed already, unless the test failed first
            for worker in workers[2:]:
                assert worker.terminate() == 0, worker.stderr()
        chain = _chain(q, run.run_id)
        runs = list_runs(q, workflow="chain.count", limit=1000)
    assert len(chain) == n + 1
    assert len(runs) == n + 1  # one successor per run, whatever was killed
    done = _done(log)
    assert set(done) == set(range(n + 1))
    twice = [p for p, count in done.items() if count > 1]
    print(f"steps run twice after the kills: {twice}")
    assert len(twice) <= 2  # at most the step in flight at each kill
