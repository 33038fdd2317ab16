"""The sync client's loop thread: a call returns what its coroutine returned,
raises what it raised, and an interrupt of the waiting thread cancels it;
calls share anyio's worker threads."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator

import anyio
import pytest
from polling import wait_for

from querator.queue.loop_thread import LoopThread


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread("test-loop")
    yield thread
    thread.stop()


def test_a_call_returns_and_raises_on_the_calling_thread(loop_thread: LoopThread) -> None:
    async def where(x: int, *, y: int) -> tuple[int, str]:
        await asyncio.sleep(0)
        return x + y, threading.current_thread().name

    assert loop_thread.call(where, 1, y=2) == (3, "test-loop")

    async def fail() -> None:
        raise LookupError("gone")

    with pytest.raises(LookupError, match="gone"):
        loop_thread.call(fail)
    assert loop_thread.call(where, 2, y=2)[0] == 4


def test_an_interrupted_call_is_cancelled(loop_thread: LoopThread) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def interrupt() -> None:
        if started.wait(10):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            loop_thread.call(forever)
    finally:
        signal.signal(signal.SIGINT, previous)
        sender.join()
    wait_for(cancelled.is_set, timeout=10)


def test_calls_share_the_worker_thread_of_a_sync_function(loop_thread: LoopThread) -> None:
    async def worker_thread() -> int:  # what an eager start does for a sync step
        return await anyio.to_thread.run_sync(threading.get_ident)

    first = loop_thread.call(worker_thread)
    assert loop_thread.call(worker_thread) == first  # not a new thread per call
    assert first != loop_thread.call(lambda: asyncio.sleep(0, threading.get_ident()))
