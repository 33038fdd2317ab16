"""Concurrency and rate limits of background tasks (``@task``), on every store."""

from __future__ import annotations

import threading
import time

import pytest
from worker_threads import serving

from querator import Querator
from querator.errors import InvalidArgument
from querator.limits import Concurrency, RateLimit
from querator.tasks import task
from querator.workflows import Worker

EVENTS: list[tuple[str, float]] = []
_LOCK = threading.Lock()


def note(what: str) -> None:
    with _LOCK:
        EVENTS.append((what, time.monotonic()))


@task(
    name="limits.t.task_one",
    keep_result=True,
    concurrency=Concurrency(1, key=lambda tag: tag[0], lease=2.0),
)
def one_at_a_time(tag: str) -> str:
    note(f"enter {tag}")
    time.sleep(0.05)  # the limited work
    note(f"exit {tag}")
    return tag


@task(name="limits.t.task_rated", keep_result=True, rate_limit=RateLimit("limits-t-task", 4))
def rated(i: int) -> int:
    note(f"rated {i}")
    return i


@pytest.fixture(autouse=True)
def _clear() -> None:
    EVENTS.clear()


def test_limited_tasks_run_one_at_a_time_per_key(q: Querator) -> None:
    with serving(Worker(q, [one_at_a_time], concurrency=8)):
        handles = [one_at_a_time.defer(q, f"{key}{n}") for n in range(4) for key in "ab"]
        assert [h.result(timeout=60) for h in handles] == [
            f"{key}{n}" for n in range(4) for key in "ab"
        ]
    for key in "ab":
        inside = most = 0
        for name, _ in sorted(EVENTS, key=lambda event: event[1]):
            if name.split()[1].startswith(key):
                inside += 1 if name.startswith("enter") else -1
                most = max(most, inside)
        assert most == 1, key
    assert len(EVENTS) == 16  # each call ran once


def test_rate_limited_tasks_are_deferred(q: Querator) -> None:
    # 8 starts at 4/s: the 8th is admitted at least 1.75 s after the key's slots
    # were made (see the step test of the same name).
    began = time.monotonic()
    with serving(Worker(q, [rated], concurrency=8)):
        handles = [rated.defer(q, i) for i in range(8)]
        assert sorted(h.result(timeout=60) for h in handles) == list(range(8))
    instants = sorted(at for _, at in EVENTS)
    assert len(instants) == 8
    assert instants[-1] - began >= 1.7, [t - began for t in instants]


def test_a_key_function_that_raises_writes_nothing(q: Querator) -> None:
    before = {info.name: info for info in q.list_queues()}
    with pytest.raises(InvalidArgument) as raised:
        one_at_a_time.defer(q, "")  # "" has no first character
    assert raised.value.field == "key"
    assert {info.name for info in q.list_queues()} == set(before)
