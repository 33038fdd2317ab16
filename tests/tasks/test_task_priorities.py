"""Task priorities: ``@task(priority=...)`` is the default of its items,
``defer(..., priority=...)`` overrides it, a worker runs the higher first among
ready calls, and a bad priority is refused before anything is written."""

from __future__ import annotations

from typing import Any

import pytest
from polling import wait_for

from querator import Querator
from querator.errors import InvalidArgument
from querator.tasks import task

from .conftest import RunWorker

QUEUE = "prio-test-tasks"
RAN: list[str] = []


@task(name="prio-test.plain", queue=QUEUE)
def plain(tag: str) -> None:
    RAN.append(tag)


@task(name="prio-test.urgent", queue=QUEUE, priority=4)
def urgent(tag: str) -> None:
    RAN.append(tag)


def _priorities(q: Querator, ids: list[str]) -> list[int]:
    by_task = {item.reference: item.priority for item in q.list_items(QUEUE)}
    return [by_task[task_id] for task_id in ids]


def test_a_deferral_takes_its_tasks_priority_unless_it_gives_one(q: Querator) -> None:
    handles = [
        plain.defer(q, "a"),
        urgent.defer(q, "b"),
        urgent.defer(q, "c", priority=-1),
        plain.defer(q, "d", priority=12),
        *plain.defer_many(q, [(("e",), {}), (("f",), {})], priority=2),
    ]
    assert _priorities(q, [h.task_id for h in handles]) == [0, 4, -1, 12, 2, 2]


def test_a_worker_runs_the_higher_priority_first(q: Querator, run_worker: RunWorker) -> None:
    RAN.clear()
    for n in range(5):
        plain.defer(q, f"plain {n}")
    urgent.defer(q, "urgent")
    with run_worker([plain, urgent], concurrency=1):
        wait_for(lambda: len(RAN) == 6, timeout=20, message="every task ran")
    assert RAN[0] == "urgent"


@pytest.mark.parametrize("bad", [True, 2.0, "high", -40_000])
def test_a_bad_priority_is_refused_before_anything_is_written(q: Querator, bad: Any) -> None:
    before = {item.id for item in q.list_items(QUEUE)} if _exists(q) else set()
    with pytest.raises(InvalidArgument, match="priority"):
        plain.defer(q, "x", priority=bad)
    with pytest.raises(InvalidArgument, match="priority"):
        task(name="prio-test.bad", priority=bad)(lambda: None)
    after = {item.id for item in q.list_items(QUEUE)} if _exists(q) else set()
    assert after == before


def _exists(q: Querator) -> bool:
    return QUEUE in {info.name for info in q.list_queues()}
