"""Each step attempt's start, end and worker, retries with their errors
(:mod:`querator.workflows.attempts`), on every backend."""

from __future__ import annotations

import itertools

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import WorkflowFailed, start
from querator.workflows.attempts import run_attempts
from querator.workflows.inspection import get_run
from querator.workflows.rerun import resume

from .conftest import RunWorker
from .flows import flaky, flaky_flow

WORKER = "attempts-worker-1"


def test_retried_attempts_keep_their_worker_times_and_errors(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([flaky_flow, flaky], client_id=WORKER):
        run = start(q, flaky_flow, "twice", 2)
        assert run.result(timeout=30) == "ok after 3"
    info = get_run(q, run.run_id)
    [step] = info.steps
    assert step.worker == WORKER and step.started_at is not None
    assert step.started_at <= step.finished_at
    tries = run_attempts(q, info)[0]
    assert [(a.attempt, a.ok) for a in tries] == [(1, False), (2, False), (3, True)]
    assert [a.error for a in tries] == [
        "RuntimeError: flaky failure 1 of twice",
        "RuntimeError: flaky failure 2 of twice",
        None,
    ]
    assert {a.worker for a in tries} == {WORKER}
    for one, after in itertools.pairwise(tries):
        assert one.started_at is not None and one.ended_at is not None
        assert one.started_at <= one.ended_at <= (after.started_at or one.ended_at)


def test_a_resumed_step_numbers_its_attempts_afresh(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([flaky_flow, flaky], client_id=WORKER):
        run = start(q, flaky_flow, "thrice", 3)  # 3 attempts allowed: fails for good
        with pytest.raises(WorkflowFailed):
            run.result(timeout=30)
        failed = get_run(q, run.run_id)
        assert [a.ok for a in run_attempts(q, failed)[0]] == [False, False, False]
        assert resume(q, run.run_id)
        wait_for(lambda: get_run(q, run.run_id).status == "completed", timeout=30)
    tries = run_attempts(q, get_run(q, run.run_id))[0]
    assert [(a.attempt, a.ok, a.error) for a in tries] == [(1, True, None)]
