"""What an open queue client runs beside its calls: opening the store patiently,
the wakeup listener, the clock's wakeups, maintenance and the gauges' reader,
in one task group from ``open()`` to ``close()``."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskGroup

from querator.clock import Clock
from querator.errors import Unavailable, UsageError
from querator.queue.backends.base import Backend, changed_settings
from querator.queue.maintenance import maintain_forever
from querator.queue.outage import Backoff, Outage
from querator.queue.waiting import WakeBoard
from querator.telemetry import queue_gauges

log = logging.getLogger("querator")


class ClientTasks:
    """The background tasks of one client, and whether it is open.

    ``forget`` drops the cached info of a queue (None: of every queue) when a
    wakeup says its catalog entry changed, or when wakeups may have been missed.

    ``wait_for_store`` (seconds) is how long :meth:`open` retries while the
    store is :class:`~querator.errors.Unavailable`; ``notified`` whether the
    wakeup listener runs at all (the store supports it and the client wants it).
    """

    def __init__(
        self,
        backend: Backend,
        board: WakeBoard,
        clock: Clock,
        *,
        notified: bool,
        wait_for_store: float,
        maintenance_interval: float,
        run_maintenance: Callable[[], Awaitable[int]],
        gauges: queue_gauges.GaugeSource,
        forget: Callable[[str | None], None],
    ) -> None:
        self._backend = backend
        self._forget = forget
        """Drops the cached info of a queue (None: of every queue)."""
        self._board = board
        self._clock = clock
        self._notified = notified
        self._wait_for_store = wait_for_store
        self._maintenance_interval = maintenance_interval
        self._run_maintenance = run_maintenance
        self._gauges = gauges
        self._tasks: TaskGroup | None = None
        self.is_open = False
        """Between :meth:`open` and :meth:`close` (an attribute: every call reads it)."""
        self._unsubscribe: Callable[[], None] | None = None
        self._listening = False
        self.listening = False
        """True while the wakeup listener is in place: every change of a queue's
        catalog entry reaches this client then (its cached info may be kept longer)."""

    async def open(self) -> None:
        """Open the store, then start maintenance, the gauges and the clock's wakeups."""
        if self._tasks is not None:
            raise UsageError("this client is already open")
        await self._open_backend()
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks
        self.is_open = True
        self._unsubscribe = self._clock.on_advance(self._woken_by_clock())
        tasks.start_soon(
            maintain_forever, self._backend, self._maintenance_interval, self._run_maintenance
        )
        tasks.start_soon(self._gauges.serve, _gauges_failed)
        queue_gauges.register(self._gauges)

    async def _open_backend(self) -> None:
        """Open the backend, retrying while it is unavailable for ``wait_for_store``."""
        outage, backoff = Outage(log, "querator: opening the store"), Backoff(initial=0.2)
        give_up = anyio.current_time() + self._wait_for_store
        while True:
            try:
                await self._backend.open()
            except Unavailable as exc:
                delay = backoff.next()
                if anyio.current_time() + delay > give_up:
                    raise
                outage.lost(exc)
                await anyio.sleep(delay)
                continue
            outage.back()
            return

    async def close(self) -> None:
        """Stop every task and close the backend (nothing when not open)."""
        tasks, self._tasks = self._tasks, None
        self.is_open = False
        if tasks is None:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        queue_gauges.unregister(self._gauges)
        tasks.cancel_scope.cancel()
        await tasks.__aexit__(None, None, None)
        await self._backend.close()

    def _woken_by_clock(self) -> Callable[[], None]:
        """A callback that wakes every waiter of this client from any thread (the
        clock moved: items may have come due, leases expired)."""
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def wake() -> None:
            if threading.get_ident() == loop_thread:
                self._board.wake_all()
            else:
                with contextlib.suppress(RuntimeError):  # the loop has ended
                    anyio.from_thread.run_sync(self._board.wake_all, token=token)

        return wake

    def _on_wake(self, wakeup: str) -> None:
        """A wakeup from another client: a queue's, or a change of its catalog
        entry (paused, resumed), which drops its cached info first."""
        queue = changed_settings(wakeup)
        if queue is not None:
            self._forget(queue)
            wakeup = queue
        self._board.wake(wakeup)

    def start(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``await service()`` until the client closes."""
        if self._tasks is None:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        self._tasks.start_soon(service)

    def listen(self) -> None:
        """Start the wakeup listener, the first time this client waits: a client
        that never waits (a producer) holds no listening connection and is not
        woken by its own notifications."""
        if self._listening or not self._notified or self._tasks is None:
            return
        self._listening = True
        self._tasks.start_soon(self._listen_forever)

    async def _listen_forever(self) -> None:
        outage, backoff = Outage(log, "querator: wakeup listener"), Backoff(initial=0.2)
        ready = self._board.wake_all

        def on_ready() -> None:
            outage.back()
            backoff.reset()
            self._forget(None)  # a pause sent while not listening was missed
            self.listening = True
            ready()

        while True:
            try:
                await self._backend.listen(self._on_wake, on_ready)
            except Unavailable as exc:
                outage.lost(exc)
            except Exception:
                log.exception("querator: wakeup listener failed; retrying")
            finally:
                self.listening = False
            self._board.wake_all()
            await anyio.sleep(backoff.next())


def _gauges_failed(exc: Exception) -> None:
    log.warning("querator: reading the queue gauges failed: %s", exc)
