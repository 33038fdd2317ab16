"""Listing runs while they change: no race drops a run from the list it belongs
to, and no race lists a run twice."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from querator import Querator
from querator.workflows import WorkflowFailed, resume, start, workflow
from querator.workflows.engine.commit import transact_creating
from querator.workflows.inspection import (
    delete_present_async,
    list_runs,
    prune_entries_async,
    scan_runs_async,
)
from querator.workflows.run_index import facet_prefix
from querator.workflows.stored import RunMeta, start_items

from .conftest import RunWorker

FAILING: set[str] = set()


@workflow(name="lr.flow")
def flow(key: str) -> str:
    if key in FAILING:
        raise RuntimeError(f"{key} fails")
    return key


@pytest.mark.parametrize("facet_workflow", [None, "lr.flow"])
def test_a_resume_between_a_listers_read_and_its_prune_keeps_the_running_entry(
    q: Querator, run_worker: RunWorker, facet_workflow: str | None
) -> None:
    """The lister reads the run's ``running`` entry while the run is failed (stale);
    the run is resumed (its writer finds the entry there and writes nothing);
    then the lister prunes. The run stays listed as running."""
    FAILING.add("r1")
    with run_worker([flow]):
        run = start(q, flow, "r1")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    prefix = facet_prefix(facet_workflow, "running")
    runs, stale = q.call(
        scan_runs_async, q.aio, prefix, "running", None, None, "running", facet_workflow, 100
    )
    assert runs == [] and [run_id for _, run_id in stale] == [run.run_id]
    assert resume(q, run.run_id) is True  # between the lister's read and its prune
    q.call(prune_entries_async, q.aio, stale)
    assert [r.run_id for r in list_runs(q, status="running")] == [run.run_id]
    assert [r.run_id for r in list_runs(q, status="running", workflow="lr.flow")] == [run.run_id]
    assert list_runs(q, status="failed") == []


def test_a_lister_killed_after_its_delete_leaves_a_resumed_run_listed(
    q: Querator, run_worker: RunWorker
) -> None:
    """The lister reads the failed run's stale ``running`` entries, the run is
    resumed, the lister deletes the entries it read and dies before writing the
    run's current ones: the run is still listed as running (the resume replaced
    those entries with new items, which the lister's delete does not name)."""
    FAILING.add("r2")
    with run_worker([flow]):
        run = start(q, flow, "r2")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    stale_ids = []
    for facet_workflow in (None, "lr.flow"):
        prefix = facet_prefix(facet_workflow, "running")
        _, stale = q.call(
            scan_runs_async, q.aio, prefix, "running", None, None, "running", facet_workflow, 9
        )
        stale_ids += [item_id for item_id, _ in stale]
    assert len(stale_ids) == 2
    assert resume(q, run.run_id) is True
    q.call(delete_present_async, q.aio, stale_ids)  # and the lister dies here
    assert [r.run_id for r in list_runs(q, status="running")] == [run.run_id]
    assert [r.run_id for r in list_runs(q, status="running", workflow="lr.flow")] == [run.run_id]


def test_starters_that_raced_with_one_key_list_one_run(q: Querator) -> None:
    """Two starters passed the idempotency lookup at once and each stored the start
    (one meta and wake by dedup, index entries stamped by each one's clock)."""
    now = q.aio.clock.now()
    run_id = "run-raced"
    for at in (now, now + timedelta(milliseconds=3), now - timedelta(milliseconds=5)):
        meta = RunMeta(workflow="lr.flow", args='[["k"], {}]', queue="lr", started_at=at)
        q.call(transact_creating, q.aio, [], start_items(run_id, meta))
    for _ in range(2):  # the first listing prunes the others' entries; the next reads one
        assert [r.run_id for r in list_runs(q)] == [run_id]
        assert [r.run_id for r in list_runs(q, status="running")] == [run_id]
        assert [r.run_id for r in list_runs(q, workflow="lr.flow")] == [run_id]
    [info] = list_runs(q, workflow="lr.flow", status="running", limit=1)
    assert list_runs(q, after=info.run_id) == []


def test_threads_starting_with_one_key_at_once_list_one_run(q: Querator) -> None:
    barrier = threading.Barrier(6)
    ids: list[str] = []

    def starter() -> None:
        barrier.wait(timeout=10)
        ids.append(start(q, flow, "same", idempotency_key="one-key").run_id)

    threads = [threading.Thread(target=starter) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(set(ids)) == 1 and len(ids) == 6
    assert [r.run_id for r in list_runs(q)] == ids[:1]
    assert [r.run_id for r in list_runs(q, status="running", workflow="lr.flow")] == ids[:1]


def test_resumes_racing_listers_keep_every_running_entry(
    q: Querator, run_worker: RunWorker
) -> None:
    """Threads list ``running`` runs (pruning the stale entries of failed runs) while
    another resumes those runs one by one: each resume races some lister's read
    and prune of its stale entry. Once all is done every resumed run is listed
    as running, on the status facet and on the workflow's."""
    keys = [f"race{i}" for i in range(24)]
    FAILING.update(keys)
    with run_worker([flow]):
        handles = [start(q, flow, key) for key in keys]
        for handle in handles:
            with pytest.raises(WorkflowFailed):
                handle.result(timeout=30)
    done = threading.Event()
    errors: list[BaseException] = []

    def lister(workflow: str | None) -> None:
        try:
            while not done.is_set():
                list_runs(q, status="running", workflow=workflow)
        except BaseException as exc:  # reported below
            errors.append(exc)
            raise

    listers = [threading.Thread(target=lister, args=(w,)) for w in (None, "lr.flow", None)]
    for thread in listers:
        thread.start()
    try:
        for handle in handles:
            assert resume(q, handle.run_id) is True
    finally:
        done.set()
        for thread in listers:
            thread.join(timeout=30)
    assert errors == []
    want = sorted(h.run_id for h in handles)
    assert sorted(r.run_id for r in list_runs(q, status="running")) == want
    assert sorted(r.run_id for r in list_runs(q, status="running", workflow="lr.flow")) == want
    assert list_runs(q, status="failed") == []


def test_a_run_failing_again_keeps_its_failed_entry_from_a_lister_killed_mid_prune(
    q: Querator, run_worker: RunWorker
) -> None:
    """A lister reads the run's ``failed`` entry while the resumed run is running
    (stale), the run fails again, and the lister deletes the entry it read and
    dies before writing the run's current entries: the run is still listed as
    failed (the resume removed its old ``failed`` entries in its commit, so the
    second failure wrote new items, which the lister's delete does not name)."""
    FAILING.add("r3")
    with run_worker([flow]):
        run = start(q, flow, "r3")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    assert resume(q, run.run_id) is True
    stale_ids = []
    for facet_workflow in (None, "lr.flow"):
        prefix = facet_prefix(facet_workflow, "failed")
        _, stale = q.call(
            scan_runs_async, q.aio, prefix, "failed", None, None, "failed", facet_workflow, 9
        )
        stale_ids += [item_id for item_id, _ in stale]
    with run_worker([flow]), pytest.raises(WorkflowFailed):
        run.result(timeout=20)
    q.call(delete_present_async, q.aio, stale_ids)  # and the lister dies here
    assert [r.run_id for r in list_runs(q, status="failed")] == [run.run_id]
    assert [r.run_id for r in list_runs(q, status="failed", workflow="lr.flow")] == [run.run_id]
    assert list_runs(q, status="running") == []
