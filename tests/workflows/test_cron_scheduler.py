"""Schedulers on a store (memory, SQLite, PostgreSQL) with an injected clock."""

from __future__ import annotations

import json
import logging
import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Item, Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.workflows import RunHandle, Worker
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
from querator.workflows.cron.schedules import ScheduleSpec, ScheduleState
from querator.workflows.cron.store import SCHEDULE_KIND, SCHEDULES_QUEUE, read_one, write

from .conftest import RunWorker
from .cron_flows import decorated, plain, record, runs_per_tick, text_tick

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)


@pytest.fixture
def q(cq: Querator) -> Querator:
    """The store's client on the test's manual clock (see conftest.py)."""
    return cq


@pytest.fixture
def run_worker(q: Querator) -> RunWorker:
    """Workers that only run the runs: these tests fire ticks with their own
    schedulers, pass by pass (a worker fires its workflows' schedules by default)."""

    def running(functions: list[Any], **options: Any) -> AbstractContextManager[Worker]:
        options.setdefault("scheduler", False)
        return serving(Worker(q, functions, poll_timeout=1.0, **options), join_timeout=15)

    return running


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


def test_a_tick_annotated_str_receives_iso_text(q: Querator, run_worker: RunWorker) -> None:
    scheduler = Scheduler(q, [text_tick])
    scheduler.register()  # used to fail: "cannot be serialised ... got datetime"
    [run_id] = scheduler.run_once()
    with run_worker([text_tick]):
        result = RunHandle(q, run_id, text_tick).result(timeout=30)
    assert result == "str:2026-03-28T23:00:00+00:00"


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


def test_a_served_only_scheduler_fires_the_schedules_of_its_workflows_only(
    q: Querator, clock: ManualClock
) -> None:
    define(q)  # cron.record
    schedule(q, "plain", plain, cron="0 * * * *", start_at=START, overlap="allow_all")
    [started] = Scheduler(q, [plain], served_only=True).run_once()
    assert started == get_schedule(q, "plain").last_run_id
    assert get_schedule(q, "hourly").last_run_id is None  # left to whoever serves cron.record
    assert len(Scheduler(q).run_once()) == 1  # a scheduler alone fires everything
    assert get_schedule(q, "hourly").last_run_id is not None


def test_a_worker_fires_the_schedules_of_the_workflows_it_serves_unless_told_not_to(
    q: Querator,
) -> None:
    worker = Worker(q, [plain, record])
    assert worker.worker.scheduler is not None
    assert worker.worker.scheduler.served == frozenset({"cron.plain", "cron.record"})
    assert Worker(q, [plain], scheduler=False).worker.scheduler is None
    with pytest.raises(InvalidArgument) as info:
        Worker(q, [plain], scheduler="no")  # type: ignore[arg-type]
    assert info.value.field == "scheduler"


def test_a_cron_that_never_fires_is_refused(q: Querator) -> None:
    for cron in ("0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 0 30 2 *"):
        with pytest.raises(InvalidArgument) as info:
            define(q, cron=cron)
        assert info.value.field == "cron" and "never fires" in info.value.rule
    define(q, "leap", cron="0 0 29 2 *")  # every four years is fine
    assert [s.name for s in list_schedules(q)] == ["leap"]


def broken_spec(name: str, **changes: str) -> ScheduleState:
    """A schedule as an older version (or a hand) may have stored it, unchecked."""
    spec = ScheduleSpec(
        name=name, workflow="cron.plain", queue="querator.workflows", cron="* * * * *"
    )
    return ScheduleState(spec=spec.model_copy(update=changes), start_at=START)


def test_a_broken_stored_schedule_never_breaks_listing_or_the_others(
    q: Querator, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    define(q)
    assert q.call(write, q.aio, None, broken_spec("feb30", cron="0 0 30 2 *"))
    assert q.call(write, q.aio, None, broken_spec("nowhere", tz="Nowhere/Land"))
    infos = {info.name: info for info in list_schedules(q)}
    assert sorted(infos) == ["feb30", "hourly", "nowhere"]
    assert infos["hourly"].broken is None and infos["hourly"].next_fire is not None
    assert "never fires" in (infos["feb30"].broken or "") and infos["feb30"].next_fire is None
    assert "Nowhere/Land" in (infos["nowhere"].broken or "")
    assert get_schedule(q, "feb30").broken == infos["feb30"].broken
    scheduler = Scheduler(q)
    with caplog.at_level(logging.ERROR, logger="querator.scheduler"):
        for _ in range(3):
            assert len(scheduler.run_once()) == 1  # hourly fires; the broken ones are skipped
            clock.advance(hours=1)
        # the loop's wait ignores it (it used to fail, and pass again, every second)
        assert scheduler.scheduler._next_due([broken_spec("x", cron="0 0 30 2 *")]) == 5.0
    told = [r.getMessage() for r in caplog.records if r.name == "querator.scheduler"]
    assert len(told) == 2, told  # once per broken schedule, not once per pass
    assert any("schedule feb30 cannot fire" in line for line in told)
    assert len(runs_per_tick(q)) == 3


def test_a_damaged_schedule_record_is_skipped_and_told_once(
    q: Querator, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    define(q)
    junk = Item(payload=b"{not a schedule", kind=SCHEDULE_KIND, dedup_key="schedule/junk/a")
    q.produce(SCHEDULES_QUEUE, [junk])
    scheduler = Scheduler(q)
    assert [s.name for s in list_schedules(q)] == ["hourly"]  # said once here too
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="querator.schedules"):
        for _ in range(3):
            assert len(scheduler.run_once()) == 1
            clock.advance(hours=1)
    told = [r.getMessage() for r in caplog.records if r.name == "querator.schedules"]
    assert len(told) == 1 and "schedule/junk/a" in told[0], told


def test_a_schedule_written_by_a_newer_version_is_fired_and_keeps_its_new_fields(
    q: Querator,
) -> None:
    """A newer release added fields to the stored schedule state (and its spec):
    this scheduler still sees and fires the schedule, and writes it back with them."""
    define(q)
    current = q.call(read_one, q.aio, "hourly")
    assert current is not None
    newer = current.record.model_dump(mode="json")
    newer["rollout_wave"] = 3
    newer["spec"]["priority"] = "high"
    assert q.call(write, q.aio, current, ScheduleState.model_validate(newer))
    assert [s.name for s in list_schedules(q)] == ["hourly"]
    assert len(Scheduler(q).run_once()) == 1  # the 23:00 tick fired
    after = q.call(read_one, q.aio, "hourly")
    assert after is not None and after.record.last_tick == START
    stored = json.loads(after.item.payload)
    assert (stored["rollout_wave"], stored["spec"]["priority"]) == (3, "high")
