"""Semaphores and locks for ``async`` code, on :class:`~querator.AsyncQuerator`
or :class:`querator.http.AsyncQuerator` (permits held through ``querator serve``)."""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from types import TracebackType

import anyio

from querator.errors import LockLost
from querator.locks import store
from querator.locks.names import DEFAULT_LEASE, check_lease, check_limit, check_lock_name
from querator.locks.permit import Permit
from querator.locks.renewer import renewer_of
from querator.locks.sources import ServesPermits, source_of
from querator.queue.service import AsyncQueueClient


def default_client_id() -> str:
    """``<host>-<pid>-<random>``: who holds a permit, as listings show it."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class AsyncSemaphore:
    """A semaphore of ``limit`` permits named ``name``, shared by every client of
    the store: at most ``limit`` holders at once, across processes and machines.

    ``async with sem.acquire(timeout=5) as permit:`` waits for a free permit,
    renews its lease in the background while the block runs, and gives it back
    at once when the block ends. A holder that dies loses its permit when its
    lease (``lease`` seconds) runs out. The semaphore is created (or brought to
    ``limit``) by the first acquire, or by :meth:`create`; creating it again is
    a no-op, and a new ``limit`` adds permits or removes them as their holders
    release. ``client_id`` names this holder in listings (default: host, pid
    and a random suffix). ``q`` is a library client (the permits are items of
    its store) or an HTTP client (held through the server's ``/v1/locks.*``,
    renewed by this client).
    """

    def __init__(
        self,
        q: AsyncQueueClient | ServesPermits,
        name: str,
        limit: int,
        *,
        lease: float = DEFAULT_LEASE,
        client_id: str | None = None,
    ) -> None:
        self.name = check_lock_name(name)
        """The semaphore's name."""
        self.limit = check_limit(limit)
        """How many holders it admits at once."""
        self.lease = check_lease(lease)
        """Seconds a permit's lease lasts between renewals."""
        self.client_id = store.check_owner(default_client_id() if client_id is None else client_id)
        """This holder's id, as listings show it."""
        self._source = source_of(q)
        self._created = False

    async def create(self) -> None:
        """Create the semaphore, or bring it to this limit and lease (idempotent)."""
        await self._source.create(self.name, self.limit, self.lease)
        self._created = True

    def acquire(self, timeout: float | None = None) -> AsyncAcquire:
        """``async with sem.acquire(timeout) as permit:`` holds a permit for the
        block. Waits up to ``timeout`` seconds (None: until one is free) and raises
        :class:`~querator.errors.RequestTimeout` when none was. Leaving the block
        raises :class:`~querator.errors.LockLost` if the permit was lost while
        held (or adds that as a note to the block's own exception)."""
        return AsyncAcquire(self, timeout)

    async def acquire_permit(self, timeout: float | None = None) -> Permit:
        """Take a permit and keep it renewed until :meth:`release` (``acquire``
        without the block)."""
        if not self._created:
            await self.create()
        renewer = renewer_of(self._source)
        started = time.monotonic()
        taken = await self._source.take(self.name, self.client_id, timeout)
        permit = Permit(self.name, taken, started)
        renewer.keep(permit)
        return permit

    async def release(self, permit: Permit) -> None:
        """Give ``permit`` back: free for the next waiter at once. Raises
        :class:`~querator.errors.LockLost` when it was lost while held. Releasing
        twice does nothing."""
        if permit._released:
            return
        with anyio.CancelScope(shield=True):
            await renewer_of(self._source).drop(permit)
            lost = permit.lost
            permit._released = True
            if lost:
                raise LockLost(permit.name, permit.token)
            await self._source.release(permit)


class AsyncLock(AsyncSemaphore):
    """A lock: a semaphore of one permit (see :class:`AsyncSemaphore`)."""

    def __init__(
        self,
        q: AsyncQueueClient | ServesPermits,
        name: str,
        *,
        lease: float = DEFAULT_LEASE,
        client_id: str | None = None,
    ) -> None:
        super().__init__(q, name, 1, lease=lease, client_id=client_id)


class AsyncAcquire:
    """What :meth:`AsyncSemaphore.acquire` returns: ``async with`` it."""

    def __init__(self, semaphore: AsyncSemaphore, timeout: float | None) -> None:
        self._semaphore = semaphore
        self._timeout = timeout
        self._permit: Permit | None = None

    async def __aenter__(self) -> Permit:
        self._permit = await self._semaphore.acquire_permit(self._timeout)
        return self._permit

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        permit, self._permit = self._permit, None
        if permit is None:
            return
        try:
            await self._semaphore.release(permit)
        except LockLost as lost:
            if exc is None:
                raise
            exc.add_note(str(lost))
