"""SyncCalls: sync task functions on the worker's own threads (no store needed)."""

from __future__ import annotations

import contextvars
import threading

import anyio
import pytest

from querator.tasks.threads import SyncCalls

pytestmark = pytest.mark.anyio

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("test_task_threads_who", default="-")


async def test_calls_run_off_the_loop_in_the_callers_context_and_raise_there() -> None:
    calls = SyncCalls()
    loop_thread = threading.get_ident()
    WHO.set("caller")
    try:
        ident, who = await calls.run(lambda: (threading.get_ident(), WHO.get()))
        assert ident != loop_thread
        assert who == "caller"

        def boom() -> None:
            raise ValueError("from the thread")

        with pytest.raises(ValueError, match="from the thread"):
            await calls.run(boom)
    finally:
        calls.close()


async def test_calls_run_at_once_on_threads_of_their_own() -> None:
    calls = SyncCalls()
    count = 6
    barrier = threading.Barrier(count, timeout=10)  # breaks unless all run together
    seen: list[int] = []

    def meet(number: int) -> int:
        barrier.wait()
        return number

    async def one(number: int) -> None:
        seen.append(await calls.run(lambda: meet(number)))

    try:
        async with anyio.create_task_group() as group:
            for number in range(count):
                group.start_soon(one, number)
    finally:
        calls.close()
    assert sorted(seen) == list(range(count))


async def test_a_cancelled_caller_still_waits_for_its_call() -> None:
    calls = SyncCalls()
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(10)
        finished.append("done")

    async def caller(scope: anyio.CancelScope) -> None:
        with scope:
            await calls.run(slow)

    try:
        scope = anyio.CancelScope()
        async with anyio.create_task_group() as group:
            group.start_soon(caller, scope)
            await anyio.to_thread.run_sync(started.wait, 10)
            scope.cancel()
            await anyio.sleep(0)
            release.set()
        assert finished == ["done"]  # the task group ended after the thread's call did
    finally:
        calls.close()


async def test_close_ends_the_threads() -> None:
    calls = SyncCalls()
    thread = await calls.run(threading.current_thread)
    assert thread.is_alive()  # kept for the next call
    calls.close()
    await anyio.to_thread.run_sync(thread.join, 10)
    assert not thread.is_alive()
