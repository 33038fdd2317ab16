"""Tasks run by real worker processes: SIGKILL mid-task, and a large drain."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from polling import wait_for
from workflows.ops_procs import durable_url_for

from querator import Querator
from querator.queue.dead_letters import dead_letters
from querator.queue.dead_reasons import REASON_HEADER
from querator.tasks import TASK_QUEUE

from .app_tasks import noop, stall, stall_once
from .task_procs import count, lines, spawn


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return durable_url_for(request, tmp_path, str(request.param))


def _waiting(q: Querator) -> int:
    return sum(p.total for p in q.stats(TASK_QUEUE).partitions)


def test_a_task_whose_worker_is_killed_runs_again_on_another(url: str, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    with Querator(url) as q:
        stall.defer(q, "k")
        first = spawn(url, "w1", log)
        second = None
        try:
            wait_for(lambda: count(log, "start", "k") == 1, timeout=60, message="w1 started k")
            first.kill()  # SIGKILL mid-task: its lease is left to expire
            second = spawn(url, "w2", log, stall=0.2)
            wait_for(lambda: count(log, "end", "k") == 1, timeout=60, message="k ran again")
            wait_for(lambda: _waiting(q) == 0, timeout=30, message="k completed")
            assert second.terminate() == 0
        finally:
            first.kill()
            if second is not None:
                second.kill()
    assert [(verb, worker) for verb, key, worker in lines(log) if key == "k"] == [
        ("start", "w1"),
        ("start", "w2"),
        ("end", "w2"),
    ]


def test_a_task_without_retries_whose_worker_is_killed_is_dead_lettered(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "tasks.log"
    with Querator(url) as q:
        stall_once.defer(q, "once")
        first = spawn(url, "w1", log)
        second = None
        try:
            wait_for(lambda: count(log, "start", "once") == 1, timeout=60, message="started")
            first.kill()
            second = spawn(url, "w2", log, stall=0.2)
            letters = wait_for(lambda: dead_letters(q, TASK_QUEUE), timeout=60, message="dead")
            assert second.terminate() == 0
        finally:
            first.kill()
            if second is not None:
                second.kill()
        assert _waiting(q) == 0
    [letter] = letters
    assert "allows 1" in letter.headers[REASON_HEADER]
    assert "lease expired" in letter.headers[REASON_HEADER]
    assert count(log, "start", "once") == 1  # never run a second time


def test_many_tasks_drained_by_two_workers_each_run_once(url: str, tmp_path: Path) -> None:
    total = 10_000 if url.startswith("postgresql") else 2_000
    log = tmp_path / "tasks.log"
    with Querator(url) as q:
        for start in range(0, total, 1000):
            noop.defer_many(q, [((f"n{i}",), {}) for i in range(start, start + 1000)])
        assert _waiting(q) == total
        workers = [spawn(url, f"w{n}", log, "--concurrency", "8") for n in (1, 2)]
        try:
            wait_for(lambda: count(log, "noop") >= total, timeout=300, message="all ran")
            wait_for(lambda: _waiting(q) == 0, timeout=60, message="all completed")
            assert [w.terminate() for w in workers] == [0, 0]
        finally:
            for worker in workers:
                worker.kill()
    ran = Counter(key for verb, key, _ in lines(log) if verb == "noop")
    assert len(ran) == total
    assert set(ran.values()) == {1}
    assert {worker for _, _, worker in lines(log)} == {"w1", "w2"}


def test_sigterm_lets_a_running_task_finish(url: str, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    with Querator(url) as q:
        stall.defer(q, "graceful")
        worker = spawn(url, "w1", log, stall=2.0)
        try:
            wait_for(lambda: count(log, "start", "graceful") == 1, timeout=60, message="started")
            assert worker.terminate() == 0  # SIGTERM mid-task: it finishes first
        finally:
            worker.kill()
        assert count(log, "end", "graceful") == 1
        assert _waiting(q) == 0
