"""Workflows of the live-body tests, run by worker processes (``live_worker.py``).

Steps log ``start``/``done`` lines through :func:`ops_flows.note`, so a test can
count how often each step ran and where. Every persisted name is explicit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from querator.workflows import sleep, step, workflow

from .ops_flows import note

REMOTE_QUEUE = "live.remote"
"""The queue of :func:`remote`: served by another worker pool than its workflow's."""


@step(name="live.tick")
def tick(key: str, position: int) -> int:
    """A logged step that takes ``$LIVE_STEP_SECONDS`` (default: no time)."""
    note("start", key, position)
    seconds = float(os.environ.get("LIVE_STEP_SECONDS", "0"))
    if seconds:
        time.sleep(seconds)
    note("done", key, position)
    return position


@workflow(name="live.loop")
def loop(key: str, n: int) -> int:
    """``n`` steps in a row; returns the sum of their positions."""
    return sum(tick(key, i) for i in range(n))


@workflow(name="live.napping_loop")
def napping_loop(key: str, n: int) -> int:
    """``n`` steps, each followed by a short durable timer (the body parks, and
    the timer's wake resumes it, or replays it on a miss)."""
    total = 0
    for i in range(n):
        total += tick(key, 2 * i)
        sleep(0.01)
    return total


@step(name="live.remote", queue=REMOTE_QUEUE)
def remote(key: str, position: int) -> str:
    """A step for another worker pool."""
    note("start", key, position)
    note("done", key, position)
    return f"{key}@{os.environ.get('OPS_WORKER', '?')}"


@workflow(name="live.hop")
def hop(key: str) -> list[str]:
    """A local step, one on :data:`REMOTE_QUEUE`, a local one again."""
    first = tick(key, 0)
    there = remote(key, 1)
    last = tick(key, 2)
    return [str(first), there, str(last)]


@step(name="live.first")
def first(key: str) -> str:
    note("done", key, 0)
    return f"first {key}"


@step(name="live.first_v2")
def first_v2(key: str) -> str:
    note("done", key, 0)
    return f"first v2 {key}"


EDITED = Path(os.environ.get("LIVE_EDITED", "/nonexistent/live-edited"))
"""While this file exists, :func:`editable` is the *edited* code (a deploy)."""


@workflow(name="live.editable")
def editable(key: str, nap: float) -> str:
    """Calls ``live.first`` and then sleeps; its edited version (``EDITED``)
    calls ``live.first_v2`` instead, at the same position."""
    got = (first_v2 if EDITED.exists() else first)(key)
    sleep(nap)
    return got
