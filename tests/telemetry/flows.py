"""Workflows and steps of the workflow telemetry tests (run in-process)."""

from __future__ import annotations

import threading

from querator.workflows import RetryPolicy, saga, sleep, step, workflow

FLAKY: dict[str, int] = {}
"""Attempts left to fail, by key (``flaky`` fails while its key's count is positive)."""
_lock = threading.Lock()
ONCE = RetryPolicy(max_attempts=1)
QUICK = RetryPolicy(max_attempts=3, initial=0.01, factor=1.0, max_delay=0.01, jitter=False)


@step(name="tel.double")
def double(n: int) -> int:
    return 2 * n


@step(name="tel.flaky", retry=QUICK)
def flaky(key: str) -> str:
    with _lock:
        left = FLAKY.get(key, 0)
        FLAKY[key] = left - 1
    if left > 0:
        raise RuntimeError(f"flaky {key}: {left} failure(s) left")
    return key


@workflow(name="tel.three")
def three(n: int) -> int:
    return double(double(double(n)))


@workflow(name="tel.parent")
def parent(n: int) -> int:
    return double(three(n))  # a child run, then a step


@workflow(name="tel.retrying")
def retrying(key: str) -> str:
    return flaky(key)


@workflow(name="tel.napping")
def napping(n: int) -> int:
    sleep(0.05)
    return double(n)


@step(name="tel.reserve", retry=ONCE)
def reserve(what: str) -> str:
    if what == "bad":
        raise RuntimeError(f"{what} unavailable")
    return f"{what}-ref"


@reserve.compensate(name="tel.cancel")
def cancel(what: str, ref: str) -> None:
    return None


@saga(name="tel.trip")
def trip(items: list[str]) -> list[str]:
    return [reserve(what) for what in items]
