"""Schedulers on a store (memory, SQLite, PostgreSQL) with an injected clock."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime

import pytest
from polling import wait_for

from querator import Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.workflows import RunHandle
from querator.workflows.cron.api import (
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    schedule,
    trigger_schedule,
)
from querator.workflows.cron.scheduler import Scheduler
from querator.workflows.cron.schedules import ScheduleState
from querator.workflows.cron.store import read_one, write

from .conftest import RunWorker
from .cron_flows import decorated, plain, record, runs_per_tick

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)


@pytest.fixture
def q(cq: Querator) -> Querator:
    """The store's client on the test's manual clock (see conftest.py)."""
    return cq


def define(q: Querator, name: str = "hourly", /, **options: object) -> None:
    options.setdefault("cron", "0 * * * *")
    options.setdefault("overlap", "allow_all")  # runs stay "running" without a worker
    schedule(q, name, record, args=("x",), start_at=START, **options)  # type: ignore[arg-type]


def test_cron_definition_rejects_bad_values(q: Querator) -> None:
    cases: list[tuple[str, dict[str, object]]] = [
        ("cron", {"cron": "99 * * * *"}),
        ("tz", {"tz": "Nowhere/Land"}),
        ("catchup", {"catchup": "some"}),
        ("overlap", {"overlap": "queue"}),
        ("jitter", {"jitter": -1}),
    ]
    for field, options in cases:
        with pytest.raises(InvalidArgument) as info:
            define(q, **options)
        assert info.value.field == field
    with pytest.raises(InvalidArgument):
        schedule(q, "bad", plain, cron="* * * * *", args=(1,))  # plain takes no argument
    assert list_schedules(q) == []


def test_cron_fires_each_tick_once_with_the_tick(
    q: Querator, run_worker: RunWorker, clock: ManualClock
) -> None:
    define(q, tz="Europe/Berlin")
    scheduler = Scheduler(q)
    assert len(scheduler.run_once()) == 1  # start_at is inclusive: 23:00
    for _ in range(5):
        clock.advance(minutes=30)
        scheduler.run_once()
        scheduler.run_once()
    counts = runs_per_tick(q)
    # 23:00 (start_at), 00:00, 01:00 (02:00 local is skipped: it is 03:00 CEST), 02:00 UTC
    assert sorted(counts) == [
        "2026-03-28T23:00:00+00:00",
        "2026-03-29T00:00:00+00:00",
        "2026-03-29T01:00:00+00:00",
    ]
    assert set(counts.values()) == {1}
    info = get_schedule(q, "hourly")
    assert info.next_fire == datetime(2026, 3, 29, 2, tzinfo=UTC)
    assert info.last_run_status == "running"
    with run_worker([record]):
        handle = RunHandle(q, info.last_run_id or "", record)
        assert handle.result(timeout=10) == "x@2026-03-29T01:00:00+00:00"
    assert get_schedule(q, "hourly").last_run_status == "completed"


def test_cron_first_pass_counts_start_at_tick(q: Querator) -> None:
    define(q)
    assert len(Scheduler(q).run_once()) == 1  # the 23:00 tick


@pytest.mark.parametrize(
    ("catchup", "expected"),
    [
        ("skip", ["2026-03-28T23:00:00+00:00"]),
        ("latest", ["2026-03-28T23:00:00+00:00", "2026-03-29T04:00:00+00:00"]),
        (
            "all",
            ["2026-03-28T23:00:00+00:00"] + [f"2026-03-29T0{h}:00:00+00:00" for h in range(5)],
        ),
    ],
)
def test_cron_catchup_after_downtime(
    q: Querator, catchup: str, expected: list[str], clock: ManualClock
) -> None:
    define(q, catchup=catchup)
    Scheduler(q).run_once()
    clock.advance(hours=5, minutes=10)  # down from 23:00 to 04:10: 00..04 missed
    Scheduler(q).run_once()
    assert sorted(runs_per_tick(q)) == expected


def test_cron_overlap_skip_and_buffer(
    q: Querator, run_worker: RunWorker, clock: ManualClock
) -> None:
    define(q, "skipper", overlap="skip")
    define(q, "buffer", overlap="buffer_one")
    scheduler = Scheduler(q)
    assert len(scheduler.run_once()) == 2  # 23:00 of both; nobody runs them
    clock.advance(hours=1)
    assert scheduler.run_once() == []  # previous still running
    clock.advance(hours=1)
    scheduler.run_once()
    infos = {i.name: i for i in list_schedules(q)}
    assert infos["buffer"].buffered == 1 and infos["skipper"].buffered == 0
    with run_worker([record]):
        wait_for(lambda: all(s.last_run_status == "completed" for s in list_schedules(q)))
        started = scheduler.run_once()  # buffer_one releases its held tick
        assert len(started) == 1
        RunHandle(q, started[0], record).result(timeout=10)
    counts = runs_per_tick(q)
    assert counts["2026-03-29T00:00:00+00:00"] == 1  # the buffered one (the first held)
    assert "2026-03-29T01:00:00+00:00" not in counts


def test_cron_overlap_cancel_and_terminate_other(
    q: Querator, run_worker: RunWorker, clock: ManualClock
) -> None:
    define(q, "cancel", overlap="cancel_other")
    define(q, "terminate", overlap="terminate_other")
    scheduler = Scheduler(q)
    first: dict[str, str | None] = {get_schedule(q, n).name: None for n in ("cancel", "terminate")}
    assert len(scheduler.run_once()) == 2
    first = {i.name: i.last_run_id for i in list_schedules(q)}
    clock.advance(hours=1)
    started = scheduler.run_once()
    assert len(started) == 1  # terminate_other starts at once; cancel_other waits
    with run_worker([record]):
        for name in ("cancel", "terminate"):
            with pytest.raises(Exception, match="cancel"):
                RunHandle(q, first[name] or "", record).result(timeout=10)
            assert RunHandle(q, first[name] or "").status() == "cancelled"
        started = scheduler.run_once()
        assert len(started) == 1  # cancel_other's buffered tick, now the other ended
        RunHandle(q, started[0], record).result(timeout=10)


def test_cron_pause_resume_delete_trigger(q: Querator, run_worker: RunWorker) -> None:
    define(q)
    scheduler = Scheduler(q)
    pause_schedule(q, "hourly", note="maintenance")
    assert scheduler.run_once() == []
    info = get_schedule(q, "hourly")
    assert info.paused and info.next_fire is None and info.note == "maintenance"
    handle = trigger_schedule(q, "hourly")
    resume_schedule(q, "hourly")
    assert len(scheduler.run_once()) == 1  # the 23:00 tick is on time
    with run_worker([record]):
        assert handle.result(timeout=10) == "x@2026-03-28T23:00:00+00:00"
    assert delete_schedule(q, "hourly") is True
    assert delete_schedule(q, "hourly") is False
    assert list_schedules(q) == []
    with pytest.raises(InvalidArgument):
        pause_schedule(q, "hourly")


def test_cron_redefinition_keeps_progress(q: Querator, clock: ManualClock) -> None:
    define(q)
    Scheduler(q).run_once()
    schedule(q, "hourly", record, cron="30 * * * *", args=("y",), overlap="allow_all")
    clock.advance(minutes=31)
    Scheduler(q).run_once()
    assert sorted(runs_per_tick(q)) == ["2026-03-28T23:00:00+00:00", "2026-03-28T23:30:00+00:00"]
    assert get_schedule(q, "hourly").cron == "30 * * * *"


def test_cron_decorated_workflow_registers_its_schedule(q: Querator) -> None:
    scheduler = Scheduler(q, [decorated, plain])
    scheduler.register()
    scheduler.register()  # unchanged: no new write
    [info] = list_schedules(q)
    assert (info.name, info.cron, info.workflow) == (
        "cron.decorated",
        "*/5 * * * *",
        "cron.decorated",
    )


def test_cron_many_schedulers_never_double_fire(
    backend_url: str, q: Querator, clock: ManualClock
) -> None:
    define(q, "busy", cron="*/10 * * * *", catchup="all", overlap="allow_all")
    clients = (
        [Querator(backend_url, clock=clock) for _ in range(4)]
        if backend_url != "memory://"
        else [q] * 4
    )
    schedulers = [Scheduler(c) for c in clients]
    barrier = threading.Barrier(len(schedulers))
    errors: list[BaseException] = []

    def drive(s: Scheduler) -> None:
        try:
            for _ in range(12):
                barrier.wait()
                s.run_once()
                barrier.wait()
                if s is schedulers[0]:
                    clock.advance(minutes=7)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=drive, args=(s,)) for s in schedulers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for c in clients:
        if c is not q:
            c.close()
    assert not errors
    counts = runs_per_tick(q)
    assert len(counts) == 8 and set(counts.values()) == {1}, counts


def test_a_schedule_of_a_workflow_the_worker_does_not_run_is_told_once(
    q: Querator, caplog: pytest.LogCaptureFixture, clock: ManualClock
) -> None:
    define(q)
    scheduler = Scheduler(q, [plain])  # this process runs t.plain only
    with caplog.at_level(logging.ERROR, logger="querator.workflows"):
        assert len(scheduler.run_once()) == 1  # fired all the same: another pool may run it
        clock.advance(minutes=60)
        assert len(scheduler.run_once()) == 1
    told = [r.getMessage() for r in caplog.records if "does not serve" in r.getMessage()]
    assert len(told) == 1 and "schedule hourly" in told[0]


def test_a_schedule_written_by_a_newer_version_is_fired_and_keeps_its_new_fields(
    q: Querator,
) -> None:
    """A newer release added fields to the stored schedule state (and its spec):
    this scheduler still sees and fires the schedule, and writes it back with them."""
    define(q)
    current = q.call(read_one, q.aio, "hourly")
    assert current is not None
    newer = current.state.model_dump(mode="json")
    newer["rollout_wave"] = 3
    newer["spec"]["priority"] = "high"
    assert q.call(write, q.aio, current, ScheduleState.model_validate(newer))
    assert [s.name for s in list_schedules(q)] == ["hourly"]
    assert len(Scheduler(q).run_once()) == 1  # the 23:00 tick fired
    after = q.call(read_one, q.aio, "hourly")
    assert after is not None and after.state.last_tick == START
    stored = json.loads(after.item.payload)
    assert (stored["rollout_wave"], stored["spec"]["priority"]) == (3, "high")
