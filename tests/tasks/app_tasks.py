"""Tasks of the task tests (in-process workers and worker processes alike).

Each writes a line ``VERB KEY WORKER`` to ``$TASKS_LOG`` when set (a worker
process), else appends to :data:`RAN` (a worker thread).
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio

from querator import Querator
from querator.tasks import TaskFunction, task
from querator.workflows import Defer, RetryPolicy, current_step, step, workflow

RAN: list[tuple[str, str]] = []
"""``(task, key)`` per attempt that started, in threads of the test process."""
FAILS_LEFT: dict[str, int] = {}
"""Key -> failures still to raise (``flaky``)."""
DEFERRED: set[str] = set()

QUICK = RetryPolicy(max_attempts=3, initial=0.05, max_delay=0.1, jitter=False)


def note(verb: str, key: str) -> None:
    """Record that ``verb`` happened for ``key`` (see the module doc)."""
    path = os.environ.get("TASKS_LOG")
    if path is None:
        RAN.append((verb, key))
        return
    line = f"{verb} {key} {os.environ.get('TASKS_WORKER', '-')}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@task(name="t.add", keep_result=True)
def add(a: int, b: int) -> int:
    note("add", f"{a}+{b}")
    return a + b


@task(name="t.noop")
def noop(key: str) -> None:
    note("noop", key)


@task(name="t.anoop")
async def anoop(key: str) -> None:
    note("anoop", key)


@task(name="tasks.t.flaky", retry=QUICK, keep_result=True)
def flaky(key: str) -> str:
    note("flaky", key)
    left = FAILS_LEFT.get(key, 0)
    if left:
        FAILS_LEFT[key] = left - 1
        raise ConnectionError(f"transient failure of {key}")
    return f"done {key}"


@task(name="t.boom", retry=None, keep_result=True)
def boom(key: str) -> None:
    note("boom", key)
    raise ValueError(f"bad input {key}")


OTHER_QUEUE = "t.other-tasks"
"""A task queue of its own; it shares querator's task dead queue with the default one."""


@task(name="t.boom_elsewhere", queue=OTHER_QUEUE, retry=None)
def boom_elsewhere(key: str) -> None:
    note("boom_elsewhere", key)
    raise ValueError(f"bad input {key}")


@task(name="t.later", keep_result=True, retry=RetryPolicy(max_attempts=1))
async def later(key: str) -> str:
    note("later", key)
    if key not in DEFERRED:
        DEFERRED.add(key)
        raise Defer(0.05)
    return f"later {key}"


@task(name="tasks.t.slow", timeout=0.2, retry=None, keep_result=True)
async def slow(key: str) -> None:
    note("slow", key)
    await anyio.sleep(30)


@task(name="t.stall", lease_timeout=2.0)
def stall(key: str) -> None:
    """Starts, then sleeps long: the process tests SIGKILL it here."""
    note("start", key)
    time.sleep(float(os.environ.get("STALL_SECONDS", "3600")))
    note("end", key)


@task(name="t.stall_once", lease_timeout=2.0, retry=None)
def stall_once(key: str) -> None:
    """As :func:`stall`, with one attempt only."""
    note("start", key)
    time.sleep(float(os.environ.get("STALL_SECONDS", "3600")))
    note("end", key)


@task(name="t.astall")
async def astall(key: str) -> None:
    """Starts, then waits for an hour (a stopping worker releases it)."""
    note("start", key)
    await anyio.sleep(3600)


ALL: list[TaskFunction[..., Any]] = [
    astall,
    add,
    noop,
    anoop,
    flaky,
    boom,
    boom_elsewhere,
    later,
    slow,
    stall,
    stall_once,
]


@task(name="t.after_step")
def after_step(key: str) -> None:
    note("after", key)


CLIENT: list[Querator] = []
"""The client a test's steps defer with (set by the test)."""


@step(name="t.deferring_step", retry=QUICK)
def deferring_step(key: str) -> str:
    """Defers ``after_step``; fails its first attempt after deferring (that
    deferral must be dropped with the attempt)."""
    after_step.defer(CLIENT[0], f"{key}-{len(RAN)}")
    note("step", key)
    if sum(1 for verb, k in RAN if verb == "step" and k == key) == 1:
        raise ConnectionError("first attempt fails after deferring")
    return key


@step(name="t.adeferring_step")
async def adeferring_step(key: str) -> str:
    step_now = current_step()
    assert step_now is not None
    await after_step.defer_async(step_now.aq, key)
    return key


@workflow(name="t.deferring_flow")
def deferring_flow(key: str) -> str:
    return deferring_step(key)


@workflow(name="t.adeferring_flow")
async def adeferring_flow(key: str) -> str:
    return await adeferring_step(key)
