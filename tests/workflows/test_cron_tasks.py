"""Cron schedules of tasks (memory, SQLite, PostgreSQL, manual clock): each tick
defers the task exactly once, however many schedulers fire it and even after
the first deferral already ran and left the queue."""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import UTC, datetime

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument, QueueNotFound, RequestTimeout
from querator.tasks import task
from querator.workflows import Worker
from querator.workflows.cron.api import get_schedule, list_schedules, schedule, trigger_schedule
from querator.workflows.cron.scheduler import Scheduler
from querator.workflows.cron.schedules import ScheduleSpec, tick_key
from querator.workflows.cron.store import read_one
from querator.workflows.cron.task_ticks import fire_task

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
QUEUE = "cron.task-queue"
TICKED: list[tuple[str, str]] = []
"""``(label, tick)`` per run of :func:`ticked`."""


@task(name="cron.ticked", queue=QUEUE)
def ticked(label: str, tick: datetime) -> None:
    TICKED.append((label, tick.isoformat()))


@pytest.fixture
def q(cq: Querator) -> Querator:
    """The store's client on the test's manual clock (see conftest.py)."""
    TICKED.clear()
    return cq


def define(q: Querator, name: str = "ticks", **options: object) -> None:
    options.setdefault("cron", "0 * * * *")
    options.setdefault("overlap", "allow_all")
    schedule(q, name, ticked, args=("x",), start_at=START, **options)  # type: ignore[arg-type]


def drain(q: Querator) -> Counter[str]:
    """Take every deferred call out of the task queue: how many per tick."""
    counts: Counter[str] = Counter()
    while True:
        try:
            batch = q.lease(QUEUE, client_id="drain", batch_size=100)
        except (RequestTimeout, QueueNotFound):
            return counts
        counts.update(json.loads(item.payload)["tick"] for item in batch)
        q.complete(QUEUE, batch)


def test_each_tick_defers_the_task_once_and_a_worker_runs_it(
    q: Querator, clock: ManualClock
) -> None:
    define(q)
    scheduler = Scheduler(q)
    for _ in range(4):
        scheduler.run_once()
        scheduler.run_once()
        clock.advance(minutes=30)
    info = get_schedule(q, "ticks")
    assert (info.target, info.workflow, info.last_run_status) == ("task", "cron.ticked", None)
    assert [s.target for s in list_schedules(q)] == ["task"]
    with serving(Worker(q, [ticked], poll_timeout=0.5, scheduler=False), join_timeout=15):
        wait_for(lambda: len(TICKED) >= 2, timeout=20, message="two ticks ran")
    assert sorted(TICKED) == [
        ("x", "2026-03-28T23:00:00+00:00"),
        ("x", "2026-03-29T00:00:00+00:00"),
    ]


def test_a_tick_fired_again_after_its_task_ran_defers_nothing(q: Querator) -> None:
    """A late scheduler (it read the schedule before another recorded the
    tick) fires it again after the first deferral ran: nothing is deferred."""
    define(q)
    stored = read_one_sync(q)
    key = tick_key("ticks", START)
    first = q.call(fire_task, q.aio, stored, START, key)
    assert drain(q) == Counter({START.isoformat(): 1})  # ran and left the queue
    assert q.call(fire_task, q.aio, stored, START, key) == first
    assert drain(q) == Counter()


def read_one_sync(q: Querator) -> ScheduleSpec:
    stored = q.call(read_one, q.aio, "ticks")
    assert stored is not None
    return stored.record.spec


def test_many_schedulers_and_a_consumer_never_double_fire(
    backend_url: str, q: Querator, clock: ManualClock
) -> None:
    define(q, "busy", cron="*/10 * * * *", catchup="all")
    clients = (
        [Querator(backend_url, clock=clock) for _ in range(3)]
        if backend_url != "memory://"
        else [q] * 3
    )
    schedulers = [Scheduler(c) for c in clients]
    barrier = threading.Barrier(len(schedulers) + 1)
    counts: Counter[str] = Counter()
    errors: list[BaseException] = []

    def drive(s: Scheduler | None) -> None:
        try:
            for _ in range(12):
                barrier.wait()
                if s is None:
                    counts.update(drain(q))  # deferrals run while schedulers fire
                else:
                    s.run_once()
                barrier.wait()
                if s is schedulers[0]:
                    clock.advance(minutes=7)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=drive, args=(s,)) for s in [*schedulers, None]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    for c in clients:
        if c is not q:
            c.close()
    assert not errors
    counts.update(drain(q))
    assert len(counts) == 8 and set(counts.values()) == {1}, counts


def test_overlap_skip_waits_for_the_last_ticks_task(q: Querator, clock: ManualClock) -> None:
    define(q, overlap="skip")
    scheduler = Scheduler(q)
    assert len(scheduler.run_once()) == 1
    clock.advance(hours=1)
    assert scheduler.run_once() == []  # the 23:00 task still waits
    drain(q)
    clock.advance(hours=1)
    assert len(scheduler.run_once()) == 1


def test_task_schedules_refuse_what_cannot_apply(q: Querator) -> None:
    for overlap in ("cancel_other", "terminate_other"):
        with pytest.raises(InvalidArgument) as error:
            define(q, overlap=overlap)
        assert error.value.field == "overlap"
    define(q)
    with pytest.raises(InvalidArgument, match="defers a task"):
        trigger_schedule(q, "ticks")


def test_a_worker_serving_a_task_fires_its_schedules(q: Querator) -> None:
    worker = Worker(q, [ticked])
    assert worker.worker.scheduler is not None
    assert worker.worker.scheduler.served == frozenset({"cron.ticked"})
