"""Workflows and steps the tests run (module level: persisted names are stable)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from querator.workflows import RetryPolicy, saga, step, workflow

CALLS: Counter[str] = Counter()
"""How many times each step function body ran, by ``step:argument``."""
FAILURES: Counter[str] = Counter()
REPLAYS: Counter[str] = Counter()
_lock = threading.Lock()


def _count(counter: Counter[str], key: str) -> int:
    with _lock:
        counter[key] += 1
        return counter[key]


def count_call(key: str) -> int:
    """Count one run of a step body in :data:`CALLS` (reset before each test)."""
    return _count(CALLS, key)


@dataclass
class Order:
    id: str
    cents: int


@step(name="t.reserve")
def reserve(order: Order) -> str:
    _count(CALLS, f"reserve:{order.id}")
    return f"R-{order.id}"


@step(name="t.charge")
def charge(order: Order, reservation: str) -> int:
    _count(CALLS, f"charge:{order.id}")
    return order.cents


@step(name="t.ship")
def ship(order: Order, reservation: str) -> dict[str, str]:
    _count(CALLS, f"ship:{order.id}")
    return {"order": order.id, "reservation": reservation}


@workflow(name="t.checkout")
def checkout(order: Order) -> dict[str, object]:
    _count(REPLAYS, order.id)
    reservation = reserve(order)
    charged = charge(order, reservation)
    shipped = ship(order, reservation)
    return {"charged": charged, "shipped": shipped}


@step(name="t.flaky", retry=RetryPolicy(max_attempts=3, initial=0.01, factor=2.0, max_delay=0.05))
def flaky(key: str, fail_times: int) -> str:
    if _count(FAILURES, key) <= fail_times:
        raise RuntimeError(f"flaky failure {FAILURES[key]} of {key}")
    return f"ok after {FAILURES[key]}"


@workflow(name="t.flaky_flow")
def flaky_flow(key: str, fail_times: int) -> str:
    return flaky(key, fail_times)


@step(name="t.a")
def step_a(key: str) -> str:
    return f"a:{key}"


@step(name="t.b")
def step_b(key: str) -> str:
    return f"b:{key}"


@workflow(name="t.fickle")
def fickle(key: str) -> str:
    """Calls a different step on its second replay: non-deterministic."""
    first = step_a(key) if _count(REPLAYS, key) == 1 else step_b(key)
    return step_a(first)


@step(name="t.async_double")
async def async_double(x: int) -> int:
    _count(CALLS, f"double:{x}")
    return 2 * x


@workflow(name="t.async_flow")
async def async_flow(x: int) -> list[int]:
    doubled = await async_double(x)
    again = await async_double(doubled)
    plain = step_a(str(again))
    return [doubled, again, len(plain)]


@workflow(name="t.catches")
def catches(key: str) -> str:
    try:
        return flaky(key, 99)
    except Exception as exc:
        return f"caught {type(exc).__name__}"


@step(name="t.slow", lease_timeout=1.0)
def slow(key: str) -> str:
    _count(CALLS, f"slow:{key}")
    # The work outlives 2.5 lease timeouts; a lease short enough to make a
    # loaded CI machine's pauses longer than it would test the machine, not us.
    threading.Event().wait(2.5)
    return f"slow:{key}"


@workflow(name="t.slow_flow")
def slow_flow(key: str) -> str:
    return slow(key)


@workflow(name="t.unregistered")
def unregistered(key: str) -> str:
    return key


OTHER_QUEUE = "t.other"
"""The queue of :func:`elsewhere`: a pool other than its workflow's."""


@step(name="t.elsewhere", queue=OTHER_QUEUE)
def elsewhere(key: str) -> str:
    _count(CALLS, f"elsewhere:{key}")
    return f"elsewhere:{key}"


@workflow(name="t.hop")
def hop(key: str) -> list[str]:
    """A step of the workflow's queue, one of :data:`OTHER_QUEUE`, one of its own again."""
    return [step_a(key), elsewhere(key), step_b(key)]


@step(name="t.book")
def book(key: str) -> str:
    _count(CALLS, f"book:{key}")
    return f"booked {key}"


@book.compensate
def unbook(key: str, booking: str | None) -> None:
    _count(CALLS, f"unbook:{key}")


@step(name="t.pay", retry=None)
def pay(key: str) -> str:
    raise RuntimeError(f"card of {key} declined")


@saga(name="t.trip")
def trip(key: str) -> str:
    """Books, then fails to pay: the booking is compensated."""
    book(key)
    return pay(key)
