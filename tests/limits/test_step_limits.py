"""Concurrency and rate limits of steps in one process, on every store: a
parked step holds no worker slot, waiters of a key start in arrival order,
rates are kept, bad input is a typed error before anything is written."""

from __future__ import annotations

import math
import threading
import time

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.errors import InvalidArgument
from querator.limits import Concurrency, RateLimit
from querator.limits.gate import park_queue
from querator.workflows import (
    DurableFunction,
    Worker,
    WorkflowFailed,
    gather,
    start,
    step,
    workflow,
)

EVENTS: list[tuple[str, float]] = []
_LOCK = threading.Lock()


def note(what: str) -> None:
    with _LOCK:
        EVENTS.append((what, time.monotonic()))


def at(what: str) -> float:
    return next(instant for name, instant in EVENTS if name == what)


ONE_AT_A_TIME = Concurrency(1, key=lambda tag, seconds: "one", lease=2.0)


@step(name="limits.t.slow", concurrency=ONE_AT_A_TIME)
def slow(tag: str, seconds: float) -> str:
    note(f"enter {tag}")
    time.sleep(seconds)  # the limited work
    note(f"exit {tag}")
    return tag


@step(name="limits.t.quick")
def quick() -> str:
    note("quick")
    return "quick"


@step(name="limits.t.rated", rate_limit=RateLimit("limits-t-rated", 4, per=1.0))
def rated(i: int) -> int:
    note(f"rated {i}")
    return i


@step(name="limits.t.bad_key", concurrency=Concurrency(1, key=lambda x: str(10 // x)))
def bad_key(x: int) -> int:
    note("bad_key ran")
    return x


@workflow(name="limits.t.slow_burst")
def slow_burst(n: int) -> list[str]:
    return gather([slow.spawn(f"s{i}", 0.15) for i in range(n)])


@workflow(name="limits.t.one_slow")
def one_slow(tag: str, seconds: float) -> str:
    return slow(tag, seconds)


@workflow(name="limits.t.quick")
def quick_run() -> str:
    return quick()


@workflow(name="limits.t.rated_burst")
def rated_burst(n: int) -> list[int]:
    return gather([rated.spawn(i) for i in range(n)])


@workflow(name="limits.t.bad_key")
def bad_key_run(x: int) -> int:
    return bad_key(x)


SERVED: list[DurableFunction] = [slow_burst, one_slow, quick_run, rated_burst, bad_key_run]


@pytest.fixture(autouse=True)
def _clear() -> None:
    EVENTS.clear()


def test_parked_steps_hold_no_worker_slot(q: Querator) -> None:
    with serving(Worker(q, SERVED, concurrency=2)):
        burst = start(q, slow_burst, 6)
        wait_for(lambda: any(name == "enter s0" or name.startswith("enter") for name, _ in EVENTS))
        assert start(q, quick_run).result(timeout=30) == "quick"
        assert len(burst.result(timeout=60)) == 6
    entered = [instant for name, instant in EVENTS if name.startswith("enter")]
    assert at("quick") < max(entered)  # it did not wait for the burst to drain
    inside = most = 0
    for name, _ in sorted(EVENTS, key=lambda event: event[1]):
        inside += 1 if name.startswith("enter") else -1 if name.startswith("exit") else 0
        most = max(most, inside)
    assert most == 1


def test_waiters_of_a_key_start_in_arrival_order(q: Querator) -> None:
    semaphore = ONE_AT_A_TIME.semaphore(slow.name, "one")
    with serving(Worker(q, SERVED, concurrency=8)):
        first = start(q, one_slow, "first", 1.0)
        wait_for(lambda: EVENTS, timeout=30)
        handles = []
        for n in range(5):
            handles.append(start(q, one_slow, f"w{n}", 0.01))
            wait_for(
                lambda n=n: len(q.list_items(park_queue(semaphore))) == n + 1,  # type: ignore[misc]
                timeout=30,
                message=f"waiter {n} parked",
            )
        assert first.result(timeout=30) == "first"
        assert [handle.result(timeout=30) for handle in handles] == [f"w{n}" for n in range(5)]
    order = [name.split()[1] for name, _ in sorted(EVENTS, key=lambda e: e[1]) if "enter" in name]
    assert order == ["first", *(f"w{n}" for n in range(5))]


def test_rate_limited_steps_are_deferred_to_their_slot(q: Querator) -> None:
    # 10 starts at 4/s: the key's 4 slots are made at its first start, 0.25 s
    # apart, and each comes back 1 s after it was taken, so the 10th start is
    # admitted at least 2.25 s after the slots were made (after ``began``). The
    # store's clock admits; the steps' own instants only lag behind it.
    began = time.monotonic()
    with serving(Worker(q, SERVED, concurrency=8)):
        assert start(q, rated_burst, 10).result(timeout=60) == list(range(10))
    instants = sorted(instant for name, instant in EVENTS if name.startswith("rated"))
    assert len(instants) == 10
    assert instants[-1] - began >= 2.2, [t - began for t in instants]


def test_a_key_function_that_raises_fails_the_call_before_anything_is_written(
    q: Querator,
) -> None:
    with serving(Worker(q, SERVED, concurrency=2)):
        with pytest.raises(WorkflowFailed) as failed:
            start(q, bad_key_run, 0).result(timeout=30)
        assert start(q, bad_key_run, 2).result(timeout=30) == 2
    assert failed.value.error_type == "InvalidArgument"
    assert "key function raised" in failed.value.message
    assert [name for name, _ in EVENTS] == ["bad_key ran"]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Concurrency(0), "limit"),
        (lambda: Concurrency(-1), "limit"),
        (lambda: Concurrency(math.nan), "limit"),  # type: ignore[arg-type]
        (lambda: Concurrency(2.5), "limit"),  # type: ignore[arg-type]
        (lambda: Concurrency(1, name="bad\nname"), "name"),
        (lambda: Concurrency(1, name="x" * 500), "name"),
        (lambda: Concurrency(1, key="tenant"), "key"),  # type: ignore[arg-type]
        (lambda: Concurrency(1, lease=math.nan), "lease"),
        (lambda: RateLimit("r", 5, per=-1.0), "per"),
        (lambda: RateLimit("r", 5, per=math.nan), "per"),
        (lambda: RateLimit("r", 0), "n"),
        (lambda: RateLimit("bad\x00name", 1), "name"),
        (lambda: step(concurrency=2)(quick.fn), "concurrency"),  # type: ignore[call-overload]
        (lambda: step(rate_limit=5)(quick.fn), "rate_limit"),  # type: ignore[call-overload]
    ],
)
def test_bad_limits_are_typed_errors(make: object, field: str, q: Querator) -> None:
    before = {info.name for info in q.list_queues()}
    with pytest.raises(InvalidArgument) as raised:
        make()  # type: ignore[operator]
    assert raised.value.field == field
    assert {info.name for info in q.list_queues()} == before
