"""Changing a workflow's code under running runs: ``patched`` / ``deprecate_patch``.

The process tests deploy ``pricing.quote`` twice: worker process v1 (no patch),
then worker process v2 (``patched("new-pricing")``); ``check_replay`` with v3
(``deprecate_patch``) shows which runs still need the old branch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    check_replay,
    deprecate_patch,
    get_run,
    patched,
    send,
    start,
)
from querator.workflows.engine.patching import first_reached, marker, marker_name
from querator.workflows.keys import PATCH_STEP

from . import lifecycle_flows as kids
from .ops_procs import durable_url_for, spawn_worker

LIFECYCLE_WORKER = Path(__file__).with_name("lifecycle_worker.py")


def test_outside_a_body_patched_is_true_and_names_are_checked() -> None:
    assert patched("anything") is True
    deprecate_patch("anything")  # nothing
    for bad in ("", "x" * 201, 7):
        with pytest.raises(InvalidArgument):
            patched(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            deprecate_patch(bad)  # type: ignore[arg-type]


def test_markers_and_the_first_reach() -> None:
    record = marker("new-pricing")
    assert record.step == PATCH_STEP and marker_name(record) == "new-pricing"
    assert marker_name(None) is None
    assert first_reached({}, 0) and first_reached({0: record}, 1)
    assert not first_reached({3: record}, 1)  # a later record: a call at 1 is in flight


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def _waits_on(q: Querator, run_id: str, topic: str) -> bool:
    return any(w.kind == "message" and w.name == topic for w in get_run(q, run_id).waits)


def _wait_on(q: Querator, run_id: str, topic: str) -> None:
    """Poll until run ``run_id`` waits for a message on ``topic``."""
    wait_for(lambda: _waits_on(q, run_id, topic), timeout=60, message=f"{run_id} on {topic}")


def test_a_workflow_edited_between_two_deploys(
    durable_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs past the patch point before the deploy finish on the old branch;
    runs that reach it after (started before or after) take the new one; none
    fails with NonDeterminism, and the replay check reports each branch."""
    log = tmp_path / "pricing.log"
    with Querator(durable_url) as q:
        v1 = spawn_worker(
            durable_url, "v1", log, script=LIFECYCLE_WORKER, env={"PRICING_CODE": "v1"}
        )
        try:
            past = [start(q, kids.quote, f"past{i}", False) for i in range(3)]
            held = [start(q, kids.quote, f"held{i}", True) for i in range(3)]
            for run in past:  # the old branch ran: parked on "go"
                _wait_on(q, run.run_id, "go")
            for run in held:
                _wait_on(q, run.run_id, "before")
        finally:
            assert v1.terminate() == 0, v1.stderr()
        v2 = spawn_worker(
            durable_url, "v2", log, script=LIFECYCLE_WORKER, env={"PRICING_CODE": "v2"}
        )
        try:
            fresh = [start(q, kids.quote, f"new{i}", False) for i in range(3)]
            for run in held:
                send(q, run.run_id, "before", "ok")
            for run in [*past, *held, *fresh]:
                _wait_on(q, run.run_id, "go")
            monkeypatch.setenv("PRICING_CODE", "v2")
            checks = {r.run_id: check_replay(q, r.run_id, kids.FLOWS) for r in past + fresh}
            monkeypatch.setenv("PRICING_CODE", "v3")
            deprecated = {r.run_id: check_replay(q, r.run_id, kids.FLOWS) for r in past + fresh}
            for run in [*past, *held, *fresh]:
                send(q, run.run_id, "go", "go")
            results = [run.result(timeout=60) for run in [*past, *held, *fresh]]
        finally:
            assert v2.terminate() == 0, v2.stderr()
    assert results == (
        [f"v1:past{i}/go" for i in range(3)]
        + [f"v2:held{i}+tax/go" for i in range(3)]
        + [f"v2:new{i}+tax/go" for i in range(3)]
    )
    for run in past:
        assert checks[run.run_id].ok and checks[run.run_id].patches == {"new-pricing": False}
        assert not deprecated[run.run_id].ok  # v3 dropped the old branch this run needs
    for run in fresh:
        assert checks[run.run_id].ok and checks[run.run_id].patches == {"new-pricing": True}
        assert deprecated[run.run_id].ok  # the marker is stepped over
