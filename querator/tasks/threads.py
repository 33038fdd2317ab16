"""Sync task functions on threads of the worker's own, handed back in bunches.

``anyio.to_thread.run_sync`` costs a future, a cancel scope, a capacity token
and a wakeup of the event loop per call. A worker's sync tasks are handed to
long-lived threads of its own instead (at most :data:`MAX_THREADS`, started
as they are needed): a call is put on a queue that an idle thread takes, runs
in a copy of the caller's context (as ``to_thread`` does), and its outcome
goes back with the others finished meanwhile: one wakeup of the event loop
for the bunch (``call_soon_threadsafe`` only when none is pending yet). A
thread that finishes a call takes the next one waiting without sleeping.

As with ``to_thread``, a call cannot be interrupted: its caller waits for it
even when cancelled. On another event loop than asyncio (trio), calls take
``anyio.to_thread.run_sync``.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

import anyio
import sniffio

__all__ = ["MAX_THREADS", "SyncCalls"]

MAX_THREADS = 40
"""Sync calls running at once, at most (anyio's default thread limit, which
bounded them before); more wait for a free thread."""


class _Call:
    __slots__ = ("context", "done", "error", "fn", "loop", "value")

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.fn = fn
        self.loop = loop
        self.context = contextvars.copy_context()
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class SyncCalls:
    """Runs sync functions for one worker's event loop (see the module doc);
    :meth:`close` ends its threads."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[_Call | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._outstanding = 0
        """Calls handed over and not finished (guarded by ``_lock``)."""
        self._finished: list[_Call] = []
        """Calls finished, not yet handed back to the loop (guarded by ``_lock``)."""
        self._waking = False
        """A hand-back is scheduled on the loop (guarded by ``_lock``)."""

    async def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on a thread; its result, or its exception raised here."""
        if sniffio.current_async_library() != "asyncio":
            return await anyio.to_thread.run_sync(fn)
        call = _Call(fn, asyncio.get_running_loop())
        with self._lock:
            self._outstanding += 1
            start = self._outstanding > self._threads and self._threads < MAX_THREADS
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._serve, name="querator-task", daemon=True).start()
        self._jobs.put(call)
        with anyio.CancelScope(shield=True):  # a thread cannot be interrupted: wait for it
            await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.value

    def close(self) -> None:
        """End the threads once the calls handed over are done (each finishes
        its call first)."""
        with self._lock:
            threads, self._threads = self._threads, 0
        for _ in range(threads):
            self._jobs.put(None)

    def _serve(self) -> None:
        while True:
            call = self._jobs.get()
            if call is None:
                return
            try:
                call.value = call.context.run(call.fn)
            except BaseException as exc:  # handed back to the caller, which raises it
                call.error = exc
            with self._lock:
                self._outstanding -= 1
                self._finished.append(call)
                wake, self._waking = not self._waking, True
            if wake:
                try:
                    call.loop.call_soon_threadsafe(self._hand_back)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    with self._lock:
                        self._finished.clear()
                        self._waking = False

    def _hand_back(self) -> None:
        """On the loop: wake the callers of every call finished so far."""
        with self._lock:
            finished, self._finished = self._finished, []
            self._waking = False
        for call in finished:
            call.done.set()
