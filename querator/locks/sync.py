"""Semaphores and locks for ordinary code, on :class:`~querator.Querator` or
:class:`querator.http.Querator`: each call runs
:class:`~querator.locks.AsyncSemaphore`'s code on the client's loop."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from querator.errors import UsageError
from querator.locks.names import DEFAULT_LEASE
from querator.locks.permit import Permit
from querator.locks.semaphore import AsyncAcquire, AsyncSemaphore
from querator.queue.client import SyncShell


def _outside_loops(call: str, instead: str) -> None:
    """UsageError naming the async twin when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{call} called inside a running event loop; use {instead} instead")


class Semaphore:
    """A semaphore of ``limit`` permits named ``name``, shared by every client of
    the store (see :class:`~querator.locks.AsyncSemaphore`, whose arguments it
    takes; ``q`` is a :class:`~querator.Querator` or a
    :class:`querator.http.Querator`). It is created, or brought to ``limit``,
    when constructed.

    ``with sem.acquire(timeout=5) as permit:`` holds a permit for the block,
    renewed by the client's loop thread while the block runs.
    """

    def __init__(
        self,
        q: SyncShell[Any],
        name: str,
        limit: int,
        *,
        lease: float = DEFAULT_LEASE,
        client_id: str | None = None,
    ) -> None:
        self._async = AsyncSemaphore(q.aio, name, limit, lease=lease, client_id=client_id)
        self._q = q
        _outside_loops("Semaphore()", "AsyncSemaphore(...) and `await sem.create()`")
        q.call(self._async.create)

    @property
    def name(self) -> str:
        """The semaphore's name."""
        return self._async.name

    @property
    def limit(self) -> int:
        """How many holders it admits at once."""
        return self._async.limit

    @property
    def client_id(self) -> str:
        """This holder's id, as listings show it."""
        return self._async.client_id

    def acquire(self, timeout: float | None = None) -> Acquire:
        """``with sem.acquire(timeout) as permit:`` (see :meth:`AsyncSemaphore.acquire`)."""
        return Acquire(self._q, self._async.acquire(timeout))

    def acquire_permit(self, timeout: float | None = None) -> Permit:
        """Take a permit and keep it renewed until :meth:`release`."""
        _outside_loops("Semaphore.acquire_permit()", "`await AsyncSemaphore.acquire_permit()`")
        return self._q.call(self._async.acquire_permit, timeout)

    def release(self, permit: Permit) -> None:
        """Give ``permit`` back (see :meth:`AsyncSemaphore.release`)."""
        _outside_loops("Semaphore.release()", "`await AsyncSemaphore.release()`")
        self._q.call(self._async.release, permit)


class Lock(Semaphore):
    """A lock: a semaphore of one permit (see :class:`Semaphore`)."""

    def __init__(
        self,
        q: SyncShell[Any],
        name: str,
        *,
        lease: float = DEFAULT_LEASE,
        client_id: str | None = None,
    ) -> None:
        super().__init__(q, name, 1, lease=lease, client_id=client_id)


class Acquire:
    """What :meth:`Semaphore.acquire` returns: ``with`` it (it runs
    :class:`~querator.locks.AsyncAcquire` on the client's loop)."""

    def __init__(self, q: SyncShell[Any], acquiring: AsyncAcquire) -> None:
        self._q = q
        self._acquiring = acquiring

    def __enter__(self) -> Permit:
        _outside_loops("Semaphore.acquire()", "`async with AsyncSemaphore.acquire()`")
        return self._q.call(self._acquiring.__aenter__)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._q.call(self._acquiring.__aexit__, exc_type, exc, tb)
