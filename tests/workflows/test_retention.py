"""Retention of finished runs: purge_runs, the worker's sweep, ``runs purge`` (every backend)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest
from polling import wait_for
from worker_threads import serving

from querator import Item, Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.queue.service import AsyncQueueClient
from querator.workflows import (
    RunNotFound,
    Worker,
    WorkflowFailed,
    get_run,
    list_runs,
    recv,
    send,
    start,
    step,
    workflow,
)
from querator.workflows.engine import heartbeat
from querator.workflows.keys import (
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    WORKFLOW_QUEUE,
    meta_key,
    result_key,
)
from querator.workflows.retention import (
    SWEEP_BATCH,
    purge_runs,
    purge_runs_async,
    sweep_retention_async,
)
from querator.workflows.stored import RunMeta, RunRecord, index_items, record_item

from .conftest import RunWorker
from .flows import Order, charge, checkout, flaky, flaky_flow, reserve, ship

FLOWS = [checkout, reserve, charge, ship, flaky_flow, flaky]
START = datetime(2030, 1, 1, tzinfo=UTC)
LATER = datetime.now(UTC) + timedelta(days=1)
"""A cut-off after every run of a test ended."""


@step(name="t.ret.double")
def double(x: int) -> int:
    return 2 * x


@workflow(name="t.ret.child")
def child(x: int) -> int:
    return double(x)


@workflow(name="t.ret.parent")
def parent(x: int) -> int:
    got = child(x)
    return got + int(recv("go"))


@workflow(name="t.ret.kept", retention=3600.0)
def kept(x: int) -> int:
    return double(x)


def _stored_keys(q: Querator, run_id: str) -> list[str]:
    """Every results-queue key that still names the run (its records and index entries)."""
    own = [i.dedup_key or "" for i in q.scan_keys(RESULTS_QUEUE, f"{run_id}/", limit=1000)]
    index = [
        i.dedup_key or ""
        for i in q.scan_keys(RESULTS_QUEUE, "index/", limit=1000)
        if (i.dedup_key or "").endswith("/" + run_id)
    ]
    return own + index


def test_finished_runs_are_purged_by_status_and_workflow(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(FLOWS):
        done = [start(q, checkout, Order(id=f"r{n}", cents=n)) for n in range(3)]
        failed = start(q, flaky_flow, "always", 99)
        for run in done:
            run.result(timeout=20)
        with pytest.raises(WorkflowFailed):
            failed.result(timeout=20)
    idle = start(q, checkout, Order(id="idle", cents=0))  # running: no worker serves it
    assert _stored_keys(q, done[0].run_id)

    # nothing ended before a cut-off older than every run
    assert purge_runs(q, before=datetime.now(UTC) - timedelta(days=1)) == 0
    assert purge_runs(q, before=LATER, status="completed", workflow="t.other") == 0
    assert purge_runs(q, before=LATER, status="completed", limit=2) == 2
    assert purge_runs(q, before=LATER, status="completed") == 1
    assert {r.run_id for r in list_runs(q)} == {failed.run_id, idle.run_id}
    for run in done:
        assert _stored_keys(q, run.run_id) == []
        with pytest.raises(RunNotFound):
            get_run(q, run.run_id)
    assert [r.run_id for r in list_runs(q, status="failed")] == [failed.run_id]

    assert purge_runs(q, before=LATER, workflow="t.flaky_flow") == 1
    assert _stored_keys(q, failed.run_id) == []
    assert purge_runs(q, before=LATER) == 0  # the running run is never purged
    assert [r.run_id for r in list_runs(q)] == [idle.run_id]
    assert get_run(q, idle.run_id).status == "running"


def test_a_child_is_kept_while_its_parent_has_not_ended(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([parent, child, double]):
        run = start(q, parent, 4)
        wait_for(
            lambda: any(r.status == "completed" for r in list_runs(q, workflow="t.ret.child")),
            timeout=20,
        )
        [kid] = list_runs(q, workflow="t.ret.child")
        assert kid.parent_run_id == run.run_id
        assert purge_runs(q, before=LATER) == 0  # the parent reads the child's result
        assert get_run(q, kid.run_id).status == "completed"
        send(q, run.run_id, "go", 1)
        assert run.result(timeout=20) == 9
    assert purge_runs(q, before=LATER) == 2
    assert list_runs(q) == []
    assert _stored_keys(q, run.run_id) == [] and _stored_keys(q, kid.run_id) == []


def test_the_sweep_purges_runs_past_their_workflows_retention(backend_url: str) -> None:
    clock = ManualClock(START)
    with Querator(backend_url, clock=clock) as cq:
        worker = Worker(cq, [kept, double], poll_timeout=1.0)
        assert worker.worker.retention == {"t.ret.kept": 3600.0}
        run = start(cq, kept, 3)
        with serving(worker, join_timeout=15):
            assert run.result(timeout=20) == 6
        retention = {"t.ret.kept": 3600.0}
        assert cq.call(sweep_retention_async, cq.aio, retention) == 0  # ended just now
        clock.advance(3599)
        assert cq.call(sweep_retention_async, cq.aio, retention) == 0
        clock.advance(2)
        assert cq.call(sweep_retention_async, cq.aio, retention) == 1
        assert list_runs(cq) == [] and _stored_keys(cq, run.run_id) == []


def _finished_run(n: int, ended: datetime) -> list[Item]:
    """What a run of ``kept`` that ended at ``ended`` leaves: its meta, its
    result and its index entries."""
    run_id = f"run-backlog{n:06d}"
    started = ended - timedelta(seconds=n + 1)
    meta = RunMeta(workflow="t.ret.kept", args=f"[{n}]", queue=WORKFLOW_QUEUE, started_at=started)
    record = RunRecord(ok=True, result=str(2 * n), error=None, cancelled=False, finished_at=ended)
    return [
        record_item(meta_key(run_id), meta, run_id),
        record_item(result_key(run_id), record, run_id),
        *index_items(run_id, meta, "completed", new=True),
    ]


def test_a_worker_purges_a_backlog_of_batches_before_its_next_beat(
    backend_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heartbeat, "WARN_EVERY", 1)  # the first beat sweeps
    # the pause after a sweep is 9x its time: on a loaded machine three sweeps and
    # two pauses may outlast the deadline; the order of things is what is tested
    monkeypatch.setattr(heartbeat, "SWEEP_REST", 1.0)
    with Querator(backend_url, clock=ManualClock(START)) as cq:
        cq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        count = 2 * SWEEP_BATCH + 50  # three sweeps' worth
        items = [i for n in range(count) for i in _finished_run(n, START - timedelta(hours=2))]
        for first in range(0, len(items), 1000):
            cq.produce(RESULTS_QUEUE, items[first : first + 1000])
        assert len(list_runs(cq, workflow="t.ret.kept", limit=1000)) == count
        with serving(Worker(cq, [kept, double], poll_timeout=1.0), join_timeout=15):
            # the next beat is HEARTBEAT (20 s) after the first: the batches after
            # the first one's are purged before it, sweep after sweep
            wait_for(
                lambda: list_runs(cq, workflow="t.ret.kept") == [],
                timeout=15,
                message="the backlog purged between two beats",
            )


def test_two_purges_at_once_purge_each_run_once(q: Querator) -> None:
    count = 60
    items = [i for n in range(count) for i in _finished_run(n, START - timedelta(hours=2))]
    q.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    for first in range(0, len(items), 1000):
        q.produce(RESULTS_QUEUE, items[first : first + 1000])

    async def both(aq: AsyncQueueClient) -> list[int]:
        counts: list[int] = []

        async def one() -> None:
            counts.append(await purge_runs_async(aq, before=START, limit=count))

        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)
        return counts

    counts = q.call(both, q.aio)
    assert sum(counts) <= count and max(counts) > 0  # a run taken by the other is not counted
    assert list_runs(q, limit=1000) == []
    assert q.scan_keys(RESULTS_QUEUE, "run-backlog", limit=10) == []
    assert q.scan_keys(RESULTS_QUEUE, "index/", limit=10) == []


def test_bad_input_is_refused_before_anything_is_purged(q: Querator) -> None:
    with pytest.raises(InvalidArgument, match="retention"):
        workflow(name="t.ret.bad", retention=-1)(lambda: None)
    with pytest.raises(InvalidArgument, match="status"):
        purge_runs(q, before=LATER, status="running")
    with pytest.raises(InvalidArgument, match="before"):
        purge_runs(q, before=datetime(2030, 1, 1))
    with pytest.raises(InvalidArgument, match="limit"):
        purge_runs(q, before=LATER, limit=0)
    assert purge_runs(q, before=LATER) == 0  # an empty store


def test_runs_purge_on_the_command_line(backend_url: str, backend_name: str) -> None:
    if backend_name == "memory":
        pytest.skip("a memory store is not shared with another process")
    from .test_ops_cli import cli

    with Querator(backend_url) as cq:
        with serving(Worker(cq, [kept, double], poll_timeout=1.0), join_timeout=15):
            runs = [start(cq, kept, n) for n in range(2)]
            assert [r.result(timeout=20) for r in runs] == [0, 2]
        idle = start(cq, child, 1)  # running: no worker serves it

        bad = cli("runs", "purge", "--before", "soon", "--url", backend_url)
        assert bad.returncode != 0 and "--before" in bad.stderr
        bad = cli("runs", "purge", "--before", "1d", "--status", "running", "--url", backend_url)
        assert bad.returncode != 0 and "status" in bad.stderr
        assert list_runs(cq, workflow="t.ret.kept", status="completed")  # nothing purged

        old = cli("runs", "purge", "--before", "1d", "--url", backend_url)
        assert old.returncode == 0, old.stderr
        assert old.stdout.strip() == "0 run(s) purged"  # they ended just now
        done = cli(
            "runs", "purge", "--before", LATER.isoformat(), "--status", "completed",
            "--url", backend_url,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "2 run(s) purged"
        assert [r.run_id for r in list_runs(cq)] == [idle.run_id]
