"""What the fault tests share: the faults, the recovery measure and the report."""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from querator.errors import Unavailable

from .cluster import Cluster

T = TypeVar("T")

FAULTS = [
    "fast-restart",
    "immediate-restart",
    "terminate-backends",
    "read-only-5s",
    "statement-timeout-5s",
]
"""The faults every test is parametrized over."""
READ_ONLY_SECONDS = 5.0
RECOVERY_BOUND = 2.0
"""Seconds from a fault's end within which the completion rate must be back."""
REPORT = Path(__file__).with_name("last_report.txt")
"""One line per test of the last run (truncated when the suite is collected)."""
PRE_FAULT_SECONDS = 3.0
"""The window before the fault whose completion rate is the reference."""
RATE_WINDOW = 1.0
"""Recovered: the first window this long after the fault with at least half that rate."""


@dataclass(frozen=True)
class FaultWindow:
    """When a fault began and ended (wall clock, ``time.time()``)."""

    name: str
    began: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.began


def inject(cluster: Cluster, fault: str) -> FaultWindow:
    """Inflict ``fault`` on ``cluster``; returns once the fault is over (the server
    answers again, or the database is writable again)."""
    began = time.time()
    if fault == "fast-restart":
        cluster.restart("fast")
    elif fault == "immediate-restart":
        cluster.restart("immediate")
    elif fault == "terminate-backends":
        cluster.terminate_backends()
    elif fault in ("read-only-5s", "statement-timeout-5s"):
        if fault == "read-only-5s":
            window = cluster.read_only(READ_ONLY_SECONDS)
        else:
            window = cluster.statement_timeout(READ_ONLY_SECONDS)
        ended = window.join(timeout=READ_ONLY_SECONDS + 30)
        assert window.began is not None
        return FaultWindow(fault, window.began, ended)
    else:
        raise ValueError(f"unknown fault {fault!r}")
    return FaultWindow(fault, began, time.time())


def recovery(
    times: Sequence[float], fault: FaultWindow, until: float
) -> tuple[float, float | None]:
    """The completion rate (per second) over the :data:`PRE_FAULT_SECONDS` before
    the fault, and the seconds from the fault's end to the start of the first
    :data:`RATE_WINDOW` with at least half that rate (None: not seen before ``until``).

    ``times`` are the completion times, sorted.
    """

    def between(start: float, end: float) -> int:
        return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)

    rate = between(fault.began - PRE_FAULT_SECONDS, fault.began) / PRE_FAULT_SECONDS
    wanted = 0.5 * rate * RATE_WINDOW
    start = fault.ended
    while start + RATE_WINDOW <= until:
        if rate > 0 and between(start, start + RATE_WINDOW) >= wanted:
            return rate, start - fault.ended
        start += 0.05
    return rate, None


def errors_after(times: Sequence[float], fault: FaultWindow) -> float:
    """Seconds from the fault's end to the last of ``times`` (calls that failed
    Unavailable); 0.0 when none failed after it."""
    return max([0.0, *(stamp - fault.ended for stamp in times)])


def until_available(call: Callable[[], T], deadline: float) -> T:
    """``call()`` again while it raises Unavailable (a fault's aftermath), until
    the monotonic ``deadline``; then the last Unavailable propagates."""
    pause = 0.05
    while True:
        try:
            return call()
        except Unavailable:
            if time.monotonic() + pause >= deadline:
                raise
        time.sleep(pause)  # back off before calling again
        pause = min(pause * 2, 1.0)


def poll(predicate: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T | None:
    """:func:`polling.wait_for` that returns None at its deadline instead of failing,
    for waits whose outcome is reported (and asserted) after the cleanup."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value or None
        time.sleep(interval)


def fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"


def report(kind: str, fields: dict[str, object]) -> str:
    """Print the line ``kind key=value ...`` and append it to :data:`REPORT`."""
    line = " ".join([kind, *(f"{key}={value}" for key, value in fields.items())])
    print(f"\n{line}")
    fd = os.open(REPORT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return line
