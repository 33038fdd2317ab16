"""Run and step priorities: ``start(priority=...)`` and ``@workflow(priority=...)``
set a run's, its wake tasks carry it, and its steps inherit it unless
``@step(priority=...)`` sets their own; a bad priority is refused before
anything is written."""

from __future__ import annotations

from typing import Any

import pytest
from polling import wait_for

from querator import Querator, StoredItem
from querator.errors import InvalidArgument, QueueNotFound
from querator.workflows import gather, step, workflow
from querator.workflows.keys import child_run_id

from .conftest import RunWorker

STEP_QUEUE = "prio-test-steps"
"""The steps' queue: no worker serves it, so their items wait there to be read."""
FLOW_QUEUE = "prio-test-flows"


@step(name="prio-test.inherits", queue=STEP_QUEUE)
def inherits(n: int) -> int:
    return n


@step(name="prio-test.own", queue=STEP_QUEUE, priority=-5)
def own(n: int) -> int:
    return n


@workflow(name="prio-test.flow", queue=FLOW_QUEUE)
def flow(n: int) -> int:
    return sum(gather([inherits.spawn(n), own.spawn(n)]))


CHILD_QUEUE = "prio-test-children"
"""The child runs' queue: no worker serves it, so their start wakes wait there."""


@workflow(name="prio-test.child", queue=CHILD_QUEUE)
def child(n: int) -> int:
    return n


@workflow(name="prio-test.parent", queue=FLOW_QUEUE)
def parent(n: int) -> int:
    return child(n)


@workflow(name="prio-test.urgent-flow", priority=3)
def urgent_flow(n: int) -> int:
    return n


def _wake_priorities(q: Querator, queue: str) -> set[int]:
    return {item.priority for item in q.list_items(queue)}


def test_a_run_gets_its_start_priority_else_its_workflows(q: Querator, qname: str) -> None:
    q.start(flow, 1, queue=f"{qname}-a", priority=7)
    q.start(urgent_flow, 1, queue=f"{qname}-b")
    q.start(urgent_flow, 1, queue=f"{qname}-c", priority=-2)
    q.start(flow, 1, queue=f"{qname}-d")

    assert _wake_priorities(q, f"{qname}-a") == {7}
    assert _wake_priorities(q, f"{qname}-b") == {3}
    assert _wake_priorities(q, f"{qname}-c") == {-2}
    assert _wake_priorities(q, f"{qname}-d") == {0}


def test_steps_inherit_their_runs_priority_unless_they_set_their_own(
    q: Querator, run_worker: RunWorker
) -> None:
    run = q.start(flow, 4, priority=9)
    with run_worker([flow]):
        wait_for(lambda: len(_steps(q, run.run_id)) == 2, timeout=20, message="both step items")
    steps = _steps(q, run.run_id)
    assert {kind.rsplit(".", 1)[-1]: priority for kind, priority in steps} == {
        "inherits": 9,
        "own": -5,
    }
    leased = q.lease(STEP_QUEUE, client_id="prio-test", batch_size=10, kinds=[k for k, _ in steps])
    assert [item.priority for item in leased] == [9, -5]  # the higher first
    q.complete(STEP_QUEUE, leased)


def test_a_child_run_inherits_its_parents_priority(q: Querator, run_worker: RunWorker) -> None:
    run = q.start(parent, 1, priority=6)
    with run_worker([parent]):
        wait_for(lambda: _wakes(q, CHILD_QUEUE), timeout=20, message="the child's start wake")
    assert {item.priority for item in _wakes(q, CHILD_QUEUE)} == {6}
    assert {item.reference for item in _wakes(q, CHILD_QUEUE)} == {child_run_id(run.run_id, 0)}


def _wakes(q: Querator, queue: str) -> list[StoredItem]:
    try:
        return q.list_items(queue)
    except QueueNotFound:  # made by the first item
        return []


def _steps(q: Querator, run_id: str) -> list[tuple[str, int]]:
    try:
        items = q.list_items(STEP_QUEUE)
    except QueueNotFound:  # made by the first step item
        return []
    return [(item.kind, item.priority) for item in items if item.reference == run_id]


@pytest.mark.parametrize("bad", [True, 1.5, "high", 40_000])
def test_a_bad_priority_is_refused_before_anything_is_written(
    q: Querator, qname: str, bad: Any
) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        q.start(flow, 1, queue=qname, priority=bad)
    with pytest.raises(InvalidArgument, match="priority"):
        step(name=f"prio-test.bad-{qname}", priority=bad)(lambda: None)
    with pytest.raises(InvalidArgument, match="priority"):
        workflow(name=f"prio-test.bad-{qname}", priority=bad)(lambda: None)
    assert qname not in {info.name for info in q.list_queues()}
