"""Listing runs and showing one with its steps, on every backend."""

from __future__ import annotations

import json

import pytest

from querator import AsyncQuerator, Querator
from querator.errors import InvalidArgument
from querator.workflows import RunNotFound, WorkflowFailed, start, start_async
from querator.workflows.inspection import get_run, get_run_async, list_runs, list_runs_async
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.reindex import reindex_runs

from .conftest import RunWorker
from .flows import Order, charge, checkout, flaky, flaky_flow, reserve, ship

FLOWS = [checkout, reserve, charge, ship, flaky_flow, flaky]


def test_nothing_is_listed_in_an_empty_store(q: Querator) -> None:
    assert list_runs(q) == []
    with pytest.raises(RunNotFound):
        get_run(q, "run-nope")


def test_runs_are_listed_with_status_and_filtered(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FLOWS):
        done = [start(q, checkout, Order(id=f"i{n}", cents=n)) for n in range(3)]
        failed = start(q, flaky_flow, "always", 99)
        for run in done:
            run.result(timeout=20)
        with pytest.raises(WorkflowFailed):
            failed.result(timeout=20)
    idle = start(q, checkout, Order(id="idle", cents=0))  # no worker serves it

    runs = list_runs(q)  # newest first
    started = [*(r.run_id for r in done), failed.run_id, idle.run_id]
    assert [r.run_id for r in runs] == started[::-1]
    assert [r.status for r in runs] == ["running", "failed"] + ["completed"] * 3
    assert runs[4].workflow == "t.checkout" and runs[1].workflow == "t.flaky_flow"
    assert all(r.finished_at is not None and r.finished_at >= r.started_at for r in runs[1:])
    assert runs[0].finished_at is None and runs[0].result is None
    assert runs[1].error_type == "StepFailed" and "always" not in (runs[1].result or "")
    assert json.loads(runs[4].result or "null")["charged"] == 0

    assert [r.run_id for r in list_runs(q, status="failed")] == [failed.run_id]
    assert [r.run_id for r in list_runs(q, status="running")] == [idle.run_id]
    assert len(list_runs(q, workflow="t.checkout")) == 4
    assert [r.run_id for r in list_runs(q, workflow="t.checkout", status="completed")] == [
        r.run_id for r in done[::-1]
    ]
    assert list_runs(q, workflow="t.nothing") == []
    assert [r.run_id for r in list_runs(q, since=runs[1].started_at)] == started[::-1][:2]


def test_listing_reads_the_index_and_prunes_entries_runs_have_left(
    q: Querator, run_worker: RunWorker
) -> None:
    """Runs are found through their index entries (not by scanning records); the
    ``running`` entries of runs that ended are deleted by the first listing."""
    with run_worker(FLOWS):
        ended = [start(q, checkout, Order(id=f"c{n}", cents=n)) for n in range(10)]
        for run in ended:
            run.result(timeout=20)
    idle = [start(q, checkout, Order(id=f"i{n}", cents=n)).run_id for n in range(2)]
    assert len(q.scan_keys(RESULTS_QUEUE, "index/st/running/")) == 12
    assert len(q.scan_keys(RESULTS_QUEUE, "index/st/completed/")) == 10
    assert [r.run_id for r in list_runs(q, status="running")] == idle[::-1]
    assert len(q.scan_keys(RESULTS_QUEUE, "index/st/running/")) == 2
    assert [r.run_id for r in list_runs(q, status="running", limit=1)] == idle[1:]
    listed = list_runs(q, workflow="t.checkout", status="completed", limit=4)
    assert [r.run_id for r in listed] == [r.run_id for r in ended[::-1][:4]]


def test_runs_are_paged(q: Querator) -> None:
    ids = [start(q, checkout, Order(id=f"p{n}", cents=n)).run_id for n in range(5)]
    first = list_runs(q, limit=2)
    second = list_runs(q, limit=2, after=first[-1].run_id)
    third = list_runs(q, limit=2, after=second[-1].run_id)
    assert [r.run_id for r in first + second + third] == ids[::-1]
    assert list_runs(q, after=ids[0]) == []
    with pytest.raises(InvalidArgument):
        list_runs(q, after="run-unknown")
    with pytest.raises(InvalidArgument):
        list_runs(q, status="sleeping")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        list_runs(q, limit=0)


def test_one_run_is_shown_with_its_steps(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FLOWS):
        ok = start(q, checkout, Order(id="s1", cents=5))
        bad = start(q, flaky_flow, "never", 99)
        ok.result(timeout=20)
        with pytest.raises(WorkflowFailed):
            bad.result(timeout=20)
    shown = get_run(q, ok.run_id)
    assert shown.status == "completed"
    assert [(s.position, s.step, s.ok, s.attempts) for s in shown.steps] == [
        (0, "t.reserve", True, 1),
        (1, "t.charge", True, 1),
        (2, "t.ship", True, 1),
    ]
    assert [json.loads(s.result or "null") for s in shown.steps][:2] == ["R-s1", 5]
    assert all(s.finished_at >= shown.started_at for s in shown.steps)
    assert json.loads(shown.args) == {"order": {"id": "s1", "cents": 5}}

    failed = get_run(q, bad.run_id)
    assert failed.status == "failed"
    [step] = failed.steps
    assert (step.step, step.ok, step.attempts, step.error_type) == (
        "t.flaky",
        False,
        3,
        "RuntimeError",
    )
    assert step.result is None and "flaky failure 3" in (step.error_message or "")


@pytest.mark.anyio
async def test_async_forms(aq: AsyncQuerator) -> None:
    run = await start_async(aq, checkout, Order(id="a1", cents=1))
    [listed] = await list_runs_async(aq)
    assert (listed.run_id, listed.status, listed.steps) == (run.run_id, "running", ())
    shown = await get_run_async(aq, run.run_id)
    assert shown.steps == () and shown.workflow == "t.checkout"


def test_runs_without_index_entries_are_indexed_again(q: Querator, run_worker: RunWorker) -> None:
    """A store written before the run index (simulated by deleting the entries):
    nothing is listed until ``reindex_runs``; then every run, by its status."""
    with run_worker(FLOWS):
        done = start(q, checkout, Order(id="r1", cents=1))
        done.result(timeout=20)
    idle = start(q, checkout, Order(id="r2", cents=2))
    entries = q.scan_keys(RESULTS_QUEUE, "index/", limit=1000)
    q.delete_items(RESULTS_QUEUE, [item.id for item in entries])
    assert list_runs(q) == []
    assert reindex_runs(q) == 2
    assert [r.run_id for r in list_runs(q)] == [idle.run_id, done.run_id]
    assert [r.run_id for r in list_runs(q, status="completed")] == [done.run_id]
    assert [r.run_id for r in list_runs(q, status="running")] == [idle.run_id]
    count = len(q.scan_keys(RESULTS_QUEUE, "index/", limit=1000))
    assert reindex_runs(q) == 2  # again: nothing written twice
    assert len(q.scan_keys(RESULTS_QUEUE, "index/", limit=1000)) == count
