"""Workflows run by worker *processes* in the operations tests (and the CLI test).

Steps append lines to the file named by ``$OPS_LOG`` (one ``write`` per line,
``O_APPEND``, flushed at once), tagged with ``$OPS_WORKER``, so the test can
tell which process ran what and what a SIGKILL interrupted:

- ``start <key> <position> <worker>`` before the side effect,
- ``done <key> <position> <worker>`` after it (the commit comes later).

Every persisted name is explicit: the test process and the workers may import
this module under different module names.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio

from querator.workflows import recv, step, wait_for_event, workflow

WORK_QUEUE = "ops.work"
"""The queue of these workflows' wake tasks and steps (tests create it first)."""
CHAIN_LENGTH = 4


def note(verb: str, key: str, position: int) -> None:
    """Append one line to ``$OPS_LOG`` (if set)."""
    path = os.environ.get("OPS_LOG")
    if not path:
        return
    line = f"{verb} {key} {position} {os.environ.get('OPS_WORKER', '?')}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@step(name="ops.link")
def link(key: str, position: int, acc: list[int]) -> list[int]:
    """One link of the chain: a logged side effect that takes a little time."""
    note("start", key, position)
    time.sleep(float(os.environ.get("OPS_WORK_SECONDS", "0.02")))  # the side effect
    note("done", key, position)
    return [*acc, position * 10]


@workflow(name="ops.chain", queue=WORK_QUEUE)
def chain(key: str) -> list[int]:
    """``CHAIN_LENGTH`` steps in a row; the result is ``[0, 10, 20, 30]``."""
    acc: list[int] = []
    for position in range(CHAIN_LENGTH):
        acc = link(key, position, acc)
    return acc


@workflow(name="ops.mailbox", queue=WORK_QUEUE)
def mailbox(key: str) -> list[Any]:
    """Two messages on topic ``m``, with a logged link between them."""
    first = recv("m")
    between = link(key, 0, [])
    return [first, between, recv("m")]


@workflow(name="ops.awaiting", queue=WORK_QUEUE)
def awaiting(key: str) -> list[Any]:
    """Events ``{key}.a`` and ``{key}.b``, with a logged link between them."""
    first = wait_for_event(f"{key}.a")
    between = link(key, 0, [])
    return [first, between, wait_for_event(f"{key}.b")]


@step(name="ops.nap")
async def nap(key: str, hold: str) -> str:
    """Runs while the file ``hold`` exists (an async step: cancellable)."""
    note("start", key, 0)
    while Path(hold).exists():
        await anyio.sleep(0.02)
    note("done", key, 0)
    return f"napped {key} on {os.environ.get('OPS_WORKER', '?')}"


@workflow(name="ops.napping", queue=WORK_QUEUE)
async def napping(key: str, hold: str) -> str:
    """One step that lasts as long as the test wants."""
    return await nap(key, hold)


@workflow(name="ops.napping_twice", queue=WORK_QUEUE)
async def napping_twice(key: str, hold: str) -> str:
    """Two naps: the second (``{key}-again``) does not wait."""
    first = await nap(key, hold)
    await nap(f"{key}-again", f"{hold}-never")
    return first


@step(name="ops.stall")
async def stall(key: str, claim: str, gate: str) -> str:
    """The first runner (the one that creates ``claim``) freezes its whole event
    loop until ``gate`` exists, as a stopped process would: its lease is not
    renewed and expires. Later runners return at once."""
    note("start", key, 0)
    try:
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    else:
        os.close(fd)
        deadline = time.monotonic() + 60
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # blocks the loop on purpose: no renewals
    note("done", key, 0)
    return f"stalled {key} on {os.environ.get('OPS_WORKER', '?')}"


@workflow(name="ops.stalling", queue=WORK_QUEUE)
async def stalling(key: str, claim: str, gate: str) -> str:
    """One step whose first attempt outlives its lease."""
    return await stall(key, claim, gate)


@step(name="ops.hello")
def hello(name: str) -> str:
    """A greeting."""
    return f"hello {name}"


@workflow(name="ops.greet", queue=WORK_QUEUE)
def greet(name: str) -> str:
    """Two greetings."""
    return hello(name) + " / " + hello(name.upper())
