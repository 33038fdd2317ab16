"""A name this worker does not serve is never leased by it: the item waits, in its
queue and untouched, for a worker that serves it; no run fails for it."""

from __future__ import annotations

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import functions as functions_module
from querator.workflows import start
from querator.workflows.keys import WORKFLOW_QUEUE, step_kind, wake_kind

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship, unregistered


def _waiting(q: Querator, kind: str) -> list[int]:
    """The attempts of the items of ``kind`` waiting in the default workflow queue."""
    return [item.attempts for item in q.list_items(WORKFLOW_QUEUE) if item.kind == kind]


def test_unknown_workflow_is_left_for_a_worker_that_knows_it(
    q: Querator, run_worker: RunWorker
) -> None:
    run = start(q, unregistered, "x")
    with run_worker([checkout, reserve, charge, ship]):
        other = start(q, checkout, Order(id="known", cents=1))
        assert other.result(timeout=20)["charged"] == 1
        assert _waiting(q, wake_kind(unregistered.name)) == [0]  # never leased here
    assert run.status() == "running"  # passed over, not dropped
    with run_worker([unregistered]):
        assert run.result(timeout=20) == "x"


def test_a_step_nobody_serves_waits_and_never_fails_its_run(
    q: Querator, run_worker: RunWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker of an older release: t.charge is not defined in its process.
    monkeypatch.delitem(functions_module._STEPS, charge.name)
    waiting = start(q, checkout, Order(id="no-charge", cents=1))
    with run_worker([checkout, reserve, ship]):  # nobody serves t.charge
        other = start(q, unregistered, "y")  # nor t.unregistered
        done = start(q, checkout, Order(id="other", cents=2))
        with run_worker([unregistered]):
            assert other.result(timeout=20) == "y"
        for run in (waiting, done):
            _wait_until_charge_waits(q, run.run_id)
        assert _waiting(q, step_kind(charge.name)) == [0, 0]
        assert waiting.status() == done.status() == "running"
    monkeypatch.setitem(functions_module._STEPS, charge.name, charge)
    with run_worker([checkout, reserve, charge, ship]):
        assert waiting.result(timeout=20)["charged"] == 1
        assert done.result(timeout=20)["charged"] == 2


def _wait_until_charge_waits(q: Querator, run_id: str) -> None:
    """Poll until the run's t.charge item is in the queue."""

    def there() -> bool:
        return any(
            item.kind == step_kind(charge.name) and item.reference == run_id
            for item in q.list_items(WORKFLOW_QUEUE)
        )

    wait_for(there, timeout=20, message=f"t.charge of {run_id} waiting")


def test_a_workflow_worker_runs_the_steps_its_workflow_calls(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([checkout]) as worker:  # reserve, charge and ship are not listed
        run = start(q, checkout, Order(id="listed-not", cents=3))
        assert run.result(timeout=20)["charged"] == 3
    assert set(worker.worker.steps) == set()  # found by name, not registered
