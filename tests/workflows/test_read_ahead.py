"""A send's wakeup starts the reads of the body parked on ``recv`` in the worker
that keeps it, while that worker leases the wake (engine/read_ahead.py)."""

from __future__ import annotations

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import send, start
from querator.workflows.engine.mailbox import sent_wake, sent_wake_of
from querator.workflows.keys import RESULTS_QUEUE, wait_key

from .conftest import RunWorker
from .flows import CALLS
from .test_messages import between, mark


def _parked(q: Querator, run_id: str, position: int) -> None:
    key = wait_key(run_id, position)
    wait_for(lambda: key in q.lookup(RESULTS_QUEUE, [key]), timeout=20, message="parked in recv")


def test_a_send_from_another_client_is_read_ahead_of_its_wake(
    q: Querator, run_worker: RunWorker, backend_url: str, backend_name: str
) -> None:
    if backend_name == "memory":
        pytest.skip("two clients of memory:// are two stores")
    with run_worker([between, mark]) as worker, Querator(backend_url) as sender:
        run = start(sender, between, "ra")
        _parked(sender, run.run_id, 0)
        send(sender, run.run_id, "a", 1)
        wait_for(lambda: CALLS["mark:ra"] == 1, timeout=20, message="first step")
        _parked(sender, run.run_id, 2)
        send(sender, run.run_id, "b", {"second": True})
        assert run.result(timeout=20) == [1, "ra2", {"second": True}]
        assert worker.worker.counts["read_ahead"] == 2


def test_sent_wake_names_the_run_and_its_wake_task() -> None:
    [name] = sent_wake("run-abc.d", "msg-1f")
    assert sent_wake_of(name) == ("run-abc.d", "run-abc.d/wake/msg-1f")
    assert sent_wake("run with spaces", "msg-1") == []  # not a wakeup's name: no read ahead
    assert sent_wake_of("querator.workflows") is None
