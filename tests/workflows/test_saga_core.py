"""Sagas: compensations in reverse order of completion, statuses, re-drive."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.workflows import (
    RetryPolicy,
    RunHandle,
    SagaFailed,
    StepFailed,
    Worker,
    gather,
    saga,
    sleep,
    start,
    step,
)
from querator.workflows.inspection import get_run, list_runs
from querator.workflows.keys import RESULTS_QUEUE, step_key

from .conftest import RunWorker

EVENTS: list[str] = []
FAIL: set[str] = set()
_lock = threading.Lock()
_release = threading.Event()
FAST = RetryPolicy(max_attempts=1)
FAST_COMP = RetryPolicy(max_attempts=0, initial=0.01, max_delay=0.02)


def _event(text: str) -> None:
    with _lock:
        EVENTS.append(text)


def _events(key: str) -> list[str]:
    with _lock:
        return [e.split(":", 1)[1].rsplit("|", 1)[0] for e in EVENTS if e.endswith(f"|{key}")]


@pytest.fixture(autouse=True)
def _reset() -> None:
    EVENTS.clear()
    FAIL.clear()
    _release.clear()


@step(name="s.book", retry=FAST)
def book(key: str, what: str) -> str:
    if f"{key}:{what}" in FAIL:
        _event(f"x:fail {what}|{key}")
        raise RuntimeError(f"{what} unavailable")
    _event(f"e:book {what}|{key}")
    return f"{what}-ref"


@book.compensate(retry=FAST_COMP)
def unbook(key: str, what: str, ref: str | None) -> None:
    if f"{key}:undo {what}" in FAIL:
        FAIL.discard(f"{key}:undo {what}")
        raise RuntimeError(f"cannot cancel {what} yet")
    _event(f"e:cancel {what} {ref}|{key}")


@step(name="s.charge", retry=FAST, compensate_on_failure=True)
def charge(key: str, cents: int) -> int:
    if f"{key}:charge" in FAIL:
        _event(f"x:partial charge|{key}")
        raise RuntimeError("gateway timeout")
    _event(f"e:charge {cents}|{key}")
    return cents


@charge.compensate(name="s.refund", retry=FAST_COMP)
def refund(key: str, cents: int, charged: int | None) -> None:
    _event(f"e:refund {charged}|{key}")


@step(name="s.note", retry=FAST)
def note(key: str) -> str:
    _event(f"e:note|{key}")
    return "noted"


@step(name="s.slow", retry=FAST)
def slow(key: str) -> str:
    _event(f"e:slow|{key}")
    _release.wait(10)
    return "slow"


@slow.compensate(retry=FAST_COMP)
def unslow(key: str, result: str) -> None:
    _event(f"e:unslow {result}|{key}")


@saga(name="s.trip")
def trip(key: str) -> list[str]:
    flight = book(key, "flight")
    note(key)  # no compensation: nothing to undo
    hotel = book(key, "hotel")
    car = book(key, "car")
    return [flight, hotel, car]


@saga(name="s.pay")
def pay(key: str) -> int:
    book(key, "stock")
    return charge(key, 500)


@saga(name="s.fan")
def fan(key: str) -> list[str]:
    first = book(key, "a")
    rest = gather([book.spawn(key, "b"), book.spawn(key, "c"), book.spawn(key, "d")])
    return [first, *rest]


@saga(name="s.catching")
def catching(key: str) -> str:
    book(key, "flight")
    try:
        return book(key, "hotel")
    except StepFailed:
        return book(key, "hostel")


@saga(name="s.slowflow")
def slowflow(key: str) -> str:
    book(key, "flight")
    return slow(key)


@saga(name="s.napping", timeout=3600)
def napping(key: str) -> str:
    book(key, "flight")
    sleep(86400)
    return book(key, "hotel")


FUNCTIONS: list[Any] = [trip, pay, fan, catching, slowflow, napping, book, charge, note, slow]


def _saga_failed(run: RunHandle) -> SagaFailed:
    with pytest.raises(SagaFailed) as caught:
        run.result(timeout=20)
    return caught.value


def test_completed_saga_runs_no_compensation(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FUNCTIONS):
        run = start(q, trip, "ok")
        assert run.result(timeout=20) == ["flight-ref", "hotel-ref", "car-ref"]
    assert run.status() == "completed"
    assert _events("ok") == ["book flight", "note", "book hotel", "book car"]


def test_failed_step_compensates_completed_steps_in_reverse(
    q: Querator, run_worker: RunWorker
) -> None:
    FAIL.add("k1:car")
    with run_worker(FUNCTIONS):
        run = start(q, trip, "k1")
        failed = _saga_failed(run)
    assert run.status() == "compensated"
    assert _events("k1") == [
        "book flight",
        "note",
        "book hotel",
        "fail car",
        "cancel hotel hotel-ref",
        "cancel flight flight-ref",
    ]
    assert failed.status == "compensated"
    assert failed.error_type == "StepFailed"
    assert "car unavailable" in failed.message
    assert failed.compensations == ("s.book.compensate@2", "s.book.compensate@0")
    assert isinstance(failed, SagaFailed)


def test_failure_at_first_step_compensates_nothing(q: Querator, run_worker: RunWorker) -> None:
    FAIL.add("k0:flight")
    with run_worker(FUNCTIONS):
        run = start(q, trip, "k0")
        failed = _saga_failed(run)
    assert failed.compensations == ()
    assert run.status() == "compensated"
    assert _events("k0") == ["fail flight"]


def test_compensate_on_failure_passes_none(q: Querator, run_worker: RunWorker) -> None:
    FAIL.add("p1:charge")
    with run_worker(FUNCTIONS):
        run = start(q, pay, "p1")
        failed = _saga_failed(run)
    assert _events("p1") == [
        "book stock",
        "partial charge",
        "refund None",
        "cancel stock stock-ref",
    ]
    assert failed.compensations == ("s.refund@1", "s.book.compensate@0")


def test_caught_step_failure_does_not_compensate(q: Querator, run_worker: RunWorker) -> None:
    FAIL.add("c1:hotel")
    with run_worker(FUNCTIONS):
        run = start(q, catching, "c1")
        assert run.result(timeout=20) == "hostel-ref"
    assert _events("c1") == ["book flight", "fail hotel", "book hostel"]


def test_gather_failure_compensates_all_completed_members(
    q: Querator, run_worker: RunWorker
) -> None:
    FAIL.add("g1:c")
    with run_worker(FUNCTIONS):
        run = start(q, fan, "g1")
        failed = _saga_failed(run)
    events = _events("g1")
    done = [e.split()[1] for e in events if e.startswith("book")]
    undone = [e.split()[1] for e in events if e.startswith("cancel")]
    assert sorted(done) == ["a", "b", "d"] and done[0] == "a"
    # Reverse order of completion: of the commits of the steps' records (b may
    # run before d yet commit after it).
    names = {0: "a", 1: "b", 3: "d"}
    stored = q.lookup(RESULTS_QUEUE, [step_key(run.run_id, p) for p in names])
    committed = sorted(names, key=lambda p: (stored[step_key(run.run_id, p)].created_at, p))
    assert undone == [names[p] for p in reversed(committed)]
    assert [c.split("@")[1] for c in failed.compensations][-1] == "0"
    assert "fail c" in events


def test_compensation_failed_is_visible_and_redrivable(q: Querator, run_worker: RunWorker) -> None:
    FAIL.update({"r1:car", "r1:undo hotel"})
    stubborn = RetryPolicy(max_attempts=1)
    original = unbook.retry
    unbook.retry = stubborn
    try:
        with run_worker(FUNCTIONS):
            run = start(q, trip, "r1")
            wait_for(lambda: run.status() == "compensation_failed", timeout=20)
            failed = _saga_failed(run)
            assert failed.status == "compensation_failed"
            assert failed.compensations == ()
            [listed] = list_runs(q, status="compensation_failed")
            assert listed.run_id == run.run_id
            assert get_run(q, run.run_id).status == "compensation_failed"
            assert _events("r1")[-1] == "fail car"
            assert run.retry_compensation() is True
            assert run.retry_compensation() is False  # already re-driven
            failed = _saga_failed(run)
    finally:
        unbook.retry = original
    assert run.status() == "compensated"
    assert failed.compensations == ("s.book.compensate@2", "s.book.compensate@0")
    assert _events("r1")[-2:] == ["cancel hotel hotel-ref", "cancel flight flight-ref"]


def test_compensation_is_retried_until_it_succeeds(q: Querator, run_worker: RunWorker) -> None:
    FAIL.update({"t1:car", "t1:undo hotel"})
    with run_worker(FUNCTIONS):
        run = start(q, trip, "t1")
        failed = _saga_failed(run)
    assert failed.status == "compensated"
    assert _events("t1")[-2:] == ["cancel hotel hotel-ref", "cancel flight flight-ref"]


def test_cancelled_saga_waits_for_running_step_then_compensates(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(FUNCTIONS):
        run = start(q, slowflow, "x1")
        wait_for(lambda: "slow" in _events("x1"), timeout=20)
        assert run.cancel("changed my mind") is True
        _release.set()
        failed = _saga_failed(run)
    assert failed.status == "cancelled"
    assert failed.error_type == "WorkflowCancelled"
    assert run.status() == "cancelled"
    assert _events("x1") == ["book flight", "slow", "unslow slow", "cancel flight flight-ref"]


def test_status_is_compensating_while_compensations_run(q: Querator, run_worker: RunWorker) -> None:
    FAIL.update({"w1:car", "w1:undo hotel"})  # the first attempt fails, the retry waits 0.5 s
    slow_policy = RetryPolicy(max_attempts=0, initial=0.5, max_delay=0.5, jitter=False)
    original = unbook.retry
    unbook.retry = slow_policy
    try:
        with run_worker(FUNCTIONS):
            run = start(q, trip, "w1")
            wait_for(lambda: run.status() == "compensating", timeout=20)
            _saga_failed(run)
    finally:
        unbook.retry = original
    assert run.status() == "compensated"


def test_timed_out_saga_is_compensated(backend_url: str) -> None:
    # On a manual clock: the deadline passes when the clock does, never because a
    # loaded machine (or a Citus coordinator's hop) was slow to book the flight.
    clock = ManualClock(datetime(2030, 6, 1, 12, 0, tzinfo=UTC))
    with (
        Querator(backend_url, clock=clock) as cq,
        serving(Worker(cq, FUNCTIONS, poll_timeout=1.0), join_timeout=15),
    ):
        run = start(cq, napping, "n1")
        wait_for(lambda: len(get_run(cq, run.run_id).steps) >= 2, timeout=30, message="nap")
        clock.advance(days=1)
        failed = _saga_failed(run)
    assert failed.error_type == "WorkflowTimeout"
    assert failed.status == "compensated"
    assert _events("n1") == ["book flight", "cancel flight flight-ref"]


def test_outside_a_workflow_saga_and_compensation_are_plain_calls() -> None:
    assert trip("inline") == ["flight-ref", "hotel-ref", "car-ref"]
    unbook("inline", "car", "car-ref")
    assert _events("inline")[-1] == "cancel car car-ref"
