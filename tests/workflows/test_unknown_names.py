"""A name this worker does not know is left for a worker that knows it; when
none does, the run's history says so."""

from __future__ import annotations

import pytest

from querator import Querator
from querator.workflows import WorkflowFailed, start
from querator.workflows import functions as functions_module
from querator.workflows.engine import unknown as unknown_module

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship, unregistered


def test_unknown_workflow_is_left_for_a_worker_that_knows_it(
    q: Querator, run_worker: RunWorker
) -> None:
    run = start(q, unregistered, "x")
    with run_worker([checkout, reserve, charge, ship]):
        other = start(q, checkout, Order(id="known", cents=1))
        assert other.result(timeout=20)["charged"] == 1
    assert run.status() == "running"  # passed over, not dropped
    with run_worker([unregistered]):
        assert run.result(timeout=20) == "x"


def test_unknown_names_end_in_the_runs_history(
    q: Querator, run_worker: RunWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unknown_module, "UNKNOWN_NAME_LEASES", 2)
    monkeypatch.setattr(unknown_module, "UNKNOWN_NAME_DELAY", 0.01)
    # A worker of an older release: t.charge is not defined in its process.
    monkeypatch.delitem(functions_module._STEPS, charge.name)
    lost_flow = start(q, unregistered, "y")
    lost_step = start(q, checkout, Order(id="no-charge", cents=1))
    with run_worker([checkout, reserve, ship]):  # nobody serves t.charge
        with pytest.raises(WorkflowFailed) as flow_error:
            lost_flow.result(timeout=20)
        with pytest.raises(WorkflowFailed) as step_error:
            lost_step.result(timeout=20)
    assert flow_error.value.error_type == "UnknownWorkflow"
    assert "t.unregistered" in flow_error.value.message
    assert "t.charge" in step_error.value.message


def test_a_workflow_worker_runs_the_steps_its_workflow_calls(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([checkout]) as worker:  # reserve, charge and ship are not listed
        run = start(q, checkout, Order(id="listed-not", cents=3))
        assert run.result(timeout=20)["charged"] == 3
    assert set(worker.worker.steps) == set()  # found by name, not registered
