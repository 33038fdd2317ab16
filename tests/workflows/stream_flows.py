"""Workflows that write streams, run by worker processes and in-process workers
(persisted names explicit: the test and the workers import this module under
different names)."""

from __future__ import annotations

import threading
from typing import Any

from querator.workflows import (
    close_stream,
    close_stream_async,
    gather,
    recv,
    set_event,
    step,
    wait_for_event,
    workflow,
    write_stream,
    write_stream_async,
)

STREAM_QUEUE = "streams.work"
"""The queue of these workflows' wake tasks and steps (tests create it first)."""


@step(name="s.tokens")
def tokens(count: int) -> int:
    """Write ``count`` tokens to stream ``out`` from a step, one commit each."""
    for n in range(count):
        write_stream("out", f"tok{n}")
    return count


@workflow(name="s.progress", queue=STREAM_QUEUE)
def progress(count: int, close: bool) -> Any:
    """Write from the body, then from a step, wait for a message, write again,
    close the stream if asked (else the run's end ends it)."""
    write_stream("out", {"stage": "start"})
    tokens(count)
    got = recv("go", timeout=120)
    write_stream("out", {"stage": "end", "got": got})
    if close:
        close_stream("out")
        write_stream("out", "after close: never read")
    return got


@workflow(name="s.gate", queue=STREAM_QUEUE)
def gate(name: str) -> Any:
    """The payload of event ``name`` (None after two minutes)."""
    return wait_for_event(name, timeout=120)


@step(name="s.atokens")
async def atokens(count: int) -> int:
    for n in range(count):
        await write_stream_async("out", n)
    await close_stream_async("out")
    return count


@workflow(name="s.async", queue=STREAM_QUEUE)
async def async_flow(count: int) -> int:
    await write_stream_async("side", "body")
    await close_stream_async("side")
    return await atokens(count)


@workflow(name="s.approval", queue=STREAM_QUEUE)
def approval(who: str) -> Any:
    """Publish a status, log to a stream, wait for an approval message."""
    set_event("status", {"waiting_for": who})
    write_stream("log", "asked")
    got = recv("approve", timeout=120)
    write_stream("log", got)
    set_event("status", "done")
    return got


SLOW_WRITER = threading.Event()
"""Set by the test to let ``s.slow`` write (in-process workers only)."""


@step(name="s.stream_slow")
def slow() -> None:
    """Writes ``slow`` to stream ``mix`` once the test lets it."""
    SLOW_WRITER.wait(30)
    write_stream("mix", "slow")


@step(name="s.stream_fast")
def fast() -> None:
    write_stream("mix", "fast")


@workflow(name="s.stream_mixed", queue=STREAM_QUEUE)
def mixed() -> None:
    """Two steps at once write one stream: the earlier position writes last."""
    gather([slow.spawn(), fast.spawn()])
    close_stream("mix")
