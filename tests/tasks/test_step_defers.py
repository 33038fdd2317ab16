"""A step that defers tasks commits them with its outcome: a task deferred by an
attempt that failed is dropped with it; one deferred by the attempt that
completed exists exactly when the step's record does."""

from __future__ import annotations

from polling import wait_for

from querator import Querator

from . import app_tasks
from .app_tasks import adeferring_flow, after_step, deferring_flow
from .conftest import RunWorker


def test_tasks_deferred_by_a_step_commit_with_its_outcome(
    q: Querator, run_worker: RunWorker
) -> None:
    app_tasks.CLIENT[:] = [q]
    with run_worker([deferring_flow, adeferring_flow, after_step]):
        run = q.start(deferring_flow, "s")
        assert run.result(timeout=30) == "s"
        arun = q.start(adeferring_flow, "s-async")
        assert arun.result(timeout=30) == "s-async"
        wait_for(lambda: len([v for v, _ in app_tasks.RAN if v == "after"]) == 2, timeout=30)
    ran = [key for verb, key in app_tasks.RAN if verb == "after"]
    # the first attempt deferred "s-0", then failed: dropped; the second deferred "s-1"
    assert sorted(ran) == ["s-1", "s-async"]
