"""Waiting for a condition with a deadline, instead of sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import pytest

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 5.0,
    interval: float = 0.01,
    message: str = "",
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    Fails the test (naming ``message`` and the last value seen) when ``timeout``
    seconds pass first. Exceptions raised by ``predicate`` propagate.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", repr(predicate))
            pytest.fail(f"condition not met within {timeout:.2f}s: {what}; last value: {value!r}")
        time.sleep(interval)


async def await_for(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """:func:`wait_for` for async tests: poll ``predicate`` between checkpoints
    until it is truthy; TimeoutError after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


def wait_until(instant: float) -> None:
    """Block until ``time.time() >= instant`` (a wall-clock point, e.g. a lease deadline)."""
    wait_for(
        lambda: time.time() >= instant,
        timeout=max(instant - time.time(), 0.0) + 5.0,
        message=f"wall clock to pass {instant}",
    )
