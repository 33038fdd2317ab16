"""A private asyncio event loop on a daemon thread: how the sync client runs
:class:`~querator.queue.service.AsyncQueueClient`'s code.

One ``call`` is one hop each way: a ``call_soon_threadsafe`` that starts the
call's task, and a lock the task releases when it ends (:class:`_Call`); about a
third of the CPU of ``run_coroutine_threadsafe`` and its two chained futures. The thread is
a daemon, so a program that exits without closing its client does not hang at
interpreter shutdown (nothing is lost: everything a call returned has been
committed by then).

The loop runs one root task until :meth:`LoopThread.stop` (``run_until_complete``,
not ``run_forever``): anyio ties its worker threads (``to_thread``, which runs a
sync step) to the root task it finds, and without one it took each call's own
task, so every call that ran a sync function started a thread and stopped it
at its end (an eager start of a 3-step run: one thread each).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

T = TypeVar("T")

WAKE_EVERY = 0.1
"""Seconds between two wake-ups of a thread waiting in :meth:`LoopThread.serve`."""


class LoopThread:
    """An event loop running on its own daemon thread until :meth:`stop`."""

    def __init__(self, name: str = "querator-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._stopping = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (use it only through thread-safe calls from other threads)."""
        return self._loop

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._stopping.wait())  # the root task
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``await fn(*args, **kwargs)`` on the loop; block until it returns.

        An interrupt (Ctrl-C) of the waiting thread cancels the call.
        """
        call: _Call[T] = _Call(fn, args, kwargs)
        loop = self._loop
        try:
            loop.call_soon_threadsafe(call.start, loop)
            call.done.acquire()
        except BaseException:
            loop.call_soon_threadsafe(call.cancel)
            raise
        return call.outcome()

    def serve(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """:meth:`call` for a long-running call (a service's run): the waiting
        thread wakes every :data:`WAKE_EVERY` seconds, so the Python signal
        handlers of the main thread run promptly even when the kernel delivered
        the signal to another thread (a wait without a timeout may then sleep
        on until the call returns)."""
        future = asyncio.run_coroutine_threadsafe(_await(fn, args, {}), self._loop)
        try:
            while not future.done():
                concurrent.futures.wait([future], timeout=WAKE_EVERY)
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def enter(self, manager: AbstractAsyncContextManager[Any]) -> Callable[[], None]:
        """Enter ``manager`` in a task of its own, which holds it open; returns
        the function that exits it (in that same task, as anyio requires)."""
        opened: concurrent.futures.Future[asyncio.Event] = concurrent.futures.Future()

        async def hold() -> None:
            closing = asyncio.Event()
            try:
                async with manager:
                    opened.set_result(closing)
                    await closing.wait()
            except BaseException as exc:
                if opened.done():
                    raise
                opened.set_exception(exc)

        held = asyncio.run_coroutine_threadsafe(hold(), self._loop)
        closing = opened.result()

        def leave() -> None:
            self._loop.call_soon_threadsafe(closing.set)
            held.result()

        return leave

    def stop(self) -> None:
        """Stop the loop (cancelling what still runs on it) and join its thread."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join()


async def _await(fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any) -> T:
    return await fn(*args, **kwargs)


class _Call(Generic[T]):
    """One :meth:`LoopThread.call`: its task on the loop, and the lock the
    calling thread waits on until the task has ended."""

    __slots__ = ("_args", "_error", "_fn", "_kwargs", "_result", "_task", "done")

    def __init__(self, fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any) -> None:
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self.done = threading.Lock()
        self.done.acquire()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the task (on the loop's thread)."""
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            self._result = await self._fn(*self._args, **self._kwargs)
        except BaseException as exc:
            self._error = exc
        finally:
            self.done.release()

    def cancel(self) -> None:
        """Cancel the task (on the loop's thread): the caller was interrupted."""
        if self._task is not None:
            self._task.cancel()

    def outcome(self) -> T:
        """What the call returned, or its exception raised again."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._result
