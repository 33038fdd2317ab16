"""Failed tasks of two task queues that share querator's task dead queue are
told apart: each queue lists, retries and purges only its own."""

from __future__ import annotations

from polling import wait_for

from querator import Querator
from querator.queue.dead_letters import dead_letters, purge
from querator.tasks import TASK_DEAD_QUEUE, TASK_QUEUE, list_tasks
from querator.tasks.handles import retry_failed

from . import app_tasks
from .app_tasks import OTHER_QUEUE, boom, boom_elsewhere
from .conftest import RunWorker


def test_each_task_queue_sees_and_retries_only_its_failed_tasks(
    q: Querator, run_worker: RunWorker
) -> None:
    boom.defer(q, "here")
    boom_elsewhere.defer(q, "there")
    with run_worker():
        wait_for(lambda: len(q.list_items(TASK_DEAD_QUEUE)) == 2, timeout=20, message="both failed")
    [here] = list_tasks(q, failed=True)
    [there] = list_tasks(q, OTHER_QUEUE, failed=True)
    assert (here.name, here.source_queue) == ("t.boom", TASK_QUEUE)
    assert (there.name, there.source_queue) == ("t.boom_elsewhere", OTHER_QUEUE)
    assert [d.id for d in dead_letters(q, OTHER_QUEUE)] == [there.id]

    assert retry_failed(q, OTHER_QUEUE) == 1  # into its own queue only
    [back] = q.list_items(OTHER_QUEUE)
    assert back.kind.endswith("t.boom_elsewhere")
    assert q.list_items(TASK_QUEUE) == []
    assert [info.id for info in list_tasks(q, failed=True)] == [here.id]
    assert purge(q, OTHER_QUEUE) == 0
    assert purge(q, TASK_QUEUE) == 1
    assert sorted(app_tasks.RAN) == [("boom", "here"), ("boom_elsewhere", "there")]
