"""Workflows on a manual clock: days of timers, retry delays and deadlines pass
at once, and what the runs record is stamped on that clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.errors import RequestTimeout
from querator.workflows import RetryPolicy, Worker, WorkflowFailed, sleep, start, step, workflow
from querator.workflows.inspection import get_run

START = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
"""Years ahead of every real clock: a decision made on the wrong clock shows."""

ATTEMPTS: list[datetime] = []


@step(name="clock.note")
def note(label: str) -> str:
    return label


@workflow(name="clock.reminder")
def reminder(order: str) -> str:
    note("invoice")
    sleep(3 * 86400)
    return note(f"reminder for {order}")


@step(
    name="clock.flaky",
    retry=RetryPolicy(max_attempts=2, initial=3600, max_delay=3600, jitter=False),
)
def flaky() -> int:
    ATTEMPTS.append(datetime.now(UTC))
    if len(ATTEMPTS) == 1:
        raise RuntimeError("first attempt fails")
    return len(ATTEMPTS)


@workflow(name="clock.retrying")
def retrying() -> int:
    return flaky()


@workflow(name="clock.slow", timeout=3600)
def slow() -> str:
    sleep(86400)
    return note("too late")


def _retry_waits(q: Querator, run_id: str) -> bool:
    """The step's item is back in its queue, unleased, due later (jump only then:
    a jump past a held lease would expire it)."""
    pending = get_run(q, run_id).pending
    return len(pending) == 1 and pending[0].leased_until is None and pending[0].due_at > START


def _steps(q: Querator, run_id: str, count: int) -> bool:
    return len(get_run(q, run_id).steps) >= count


def test_a_three_day_timer_passes_when_the_clock_does(cq: Querator, clock: ManualClock) -> None:
    with serving(Worker(cq, [reminder], poll_timeout=1.0)):
        run = start(cq, reminder, "o-1")
        wait_for(lambda: _steps(cq, run.run_id, 2), timeout=30, message="timer stored")
        timer = get_run(cq, run.run_id).steps[1]
        assert timer.until == START + timedelta(days=3)
        clock.advance(days=2, hours=23)
        with pytest.raises(RequestTimeout):
            run.result(timeout=0.5)  # not due yet on the clock (a real second later)
        clock.advance(hours=1)
        assert run.result(timeout=30) == "reminder for o-1"
    info = get_run(cq, run.run_id)
    assert info.started_at == START
    assert info.finished_at == START + timedelta(days=3)
    assert [s.finished_at for s in info.steps] == [START, START, START + timedelta(days=3)]


def test_a_retry_delay_of_an_hour_passes_when_the_clock_does(
    cq: Querator, clock: ManualClock
) -> None:
    ATTEMPTS.clear()
    with serving(Worker(cq, [retrying], poll_timeout=1.0)):
        run = start(cq, retrying)
        wait_for(lambda: _retry_waits(cq, run.run_id), timeout=30, message="retry stored")
        assert len(ATTEMPTS) == 1
        clock.advance(minutes=59)
        with pytest.raises(RequestTimeout):
            run.result(timeout=0.5)
        clock.advance(minutes=1)
        assert run.result(timeout=30) == 2
    [record] = get_run(cq, run.run_id).steps
    assert (record.attempts, record.finished_at) == (2, START + timedelta(hours=1))


def test_a_deadline_passes_on_the_clock(cq: Querator, clock: ManualClock) -> None:
    with serving(Worker(cq, [slow], poll_timeout=1.0)):
        run = start(cq, slow)
        wait_for(lambda: _steps(cq, run.run_id, 1), timeout=30, message="timer stored")
        assert get_run(cq, run.run_id).deadline == START + timedelta(hours=1)
        clock.advance(days=1)
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=30)
    assert failed.value.error_type == "WorkflowTimeout"
    assert get_run(cq, run.run_id).finished_at == START + timedelta(days=1)
