"""Routing: apps sharing a store never lease each other's items, and items
written before routing (bare kinds) are handed on, never failed."""

from __future__ import annotations

from polling import wait_for

from querator import Item, Querator
from querator.cli import load_functions
from querator.workflows import start
from querator.workflows.keys import (
    DEAD_QUEUE,
    DEAD_SETTINGS,
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    STEP_KIND,
    WAKE_KIND,
    WORK_SETTINGS,
    WORKFLOW_QUEUE,
    new_run_id,
    step_kind,
    wake_kind,
)
from querator.workflows.runs import RunHandle
from querator.workflows.stored import RunMeta, StepPayload, start_items, step_item

from . import app_pipeline as a
from . import app_reports as b
from .conftest import RunWorker


def _items(q: Querator, queue: str) -> list[Item | object]:
    partitions = q.get_queue(queue).settings.partitions
    return [item for p in range(partitions) for item in q.list_items(queue, partition=p)]


def test_a_worker_of_another_app_never_leases_an_apps_items(
    q: Querator, run_worker: RunWorker
) -> None:
    runs = [start(q, a.pipeline, n) for n in range(4)] + [start(q, a.booking, n) for n in range(2)]
    app_b = load_functions("workflows.app_reports")  # as `querator worker` loads it
    with run_worker(app_b) as worker_b:
        assert WORKFLOW_QUEUE in worker_b.worker.queues  # b's steps have no queue
        assert start(q, b.report, 1).result(timeout=20) == 11
        assert start(q, b.trip, 2).result(timeout=20) == "h2"
        waiting = _items(q, WORKFLOW_QUEUE)
        assert len(waiting) == len(runs)
        assert all(getattr(item, "attempts", None) == 0 for item in waiting)
        assert all(run.status() == "running" for run in runs)
        with run_worker(load_functions("workflows.app_pipeline")):
            results = [run.result(timeout=30) for run in runs]
    assert results == [2, 4, 6, 8, "r0-1", "r1-2"]
    assert worker_b.worker.counts["leased"] == 2  # its own two start wakes, nothing of a's


def _legacy_run(q: Querator, n: int, *, step: bool) -> RunHandle:
    """A run of ``a.pipeline`` as querator wrote it before routing: its start wake
    (or, with ``step``, its first step item) under a bare kind."""
    run_id = new_run_id(None)
    meta = RunMeta(
        workflow=a.pipeline.name,
        args=a.pipeline.codec.encode_args((n,), {}),
        queue=WORKFLOW_QUEUE,
        started_at=q.aio.clock.now(),
    )
    produce = start_items(run_id, meta)
    if step:
        payload = StepPayload(
            run_id=run_id,
            position=0,
            step=a.fetch.name,
            args=a.fetch.codec.encode_args((n,), {}),
            workflow_queue=WORKFLOW_QUEUE,
        )
        legacy = step_item(payload).model_copy(update={"kind": STEP_KIND})
    else:
        legacy = produce[WORKFLOW_QUEUE][0].model_copy(update={"kind": WAKE_KIND})
    produce[WORKFLOW_QUEUE] = [legacy]
    q.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    q.create_queue(DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
    q.create_queue(WORKFLOW_QUEUE, WORK_SETTINGS, exist_ok=True)
    q.transact(produce=produce)
    return RunHandle(q, run_id)


def test_items_written_before_routing_are_handed_on_by_a_worker_that_does_not_serve_them(
    q: Querator, run_worker: RunWorker
) -> None:
    wake_run = _legacy_run(q, 1, step=False)
    step_run = _legacy_run(q, 2, step=True)
    with run_worker(load_functions("workflows.app_reports")):

        def handed_on() -> bool:
            kinds = sorted(getattr(item, "kind", "") for item in _items(q, WORKFLOW_QUEUE))
            return kinds == [step_kind(a.fetch.name), wake_kind(a.pipeline.name)]

        wait_for(handed_on, timeout=20, message="legacy items handed on under routed kinds")
        assert wake_run.status() == step_run.status() == "running"
    with run_worker(load_functions("workflows.app_pipeline")):
        assert wake_run.result(timeout=20) == 4
        assert step_run.result(timeout=20) == 6


def test_items_written_before_routing_are_run_by_a_worker_that_serves_them(
    q: Querator, run_worker: RunWorker
) -> None:
    runs = [_legacy_run(q, 3, step=False), _legacy_run(q, 4, step=True)]
    with run_worker(load_functions("workflows.app_pipeline")):
        assert [run.result(timeout=20) for run in runs] == [8, 10]
