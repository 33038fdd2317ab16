"""The HTTP clients' lock methods: ``/v1/locks.*`` from Python.

:class:`AsyncLockCalls` is mixed into :class:`querator.http.AsyncQuerator`,
:class:`LockCalls` into :class:`querator.http.Querator`. A permit held over
HTTP is renewed by its holder (``renew_lock`` before ``lease_deadline``); the
server keeps no background task for it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from querator.http.callers import LoopOwner, Poster
from querator.http.durations import format_duration
from querator.http.wire import queue as wq
from querator.http.wire.locks import PermitReply, SemaphoresReply
from querator.locks.listing import SemaphoreInfo
from querator.locks.names import DEFAULT_LEASE, check_lease, check_limit, check_lock_name
from querator.queue.validation import check_duration

T = TypeVar("T")


class AsyncLockCalls:
    """Locks and semaphores over HTTP (see :mod:`querator.locks`)."""

    async def create_lock(
        self: Poster, name: str, limit: int = 1, *, lease: float = DEFAULT_LEASE
    ) -> None:
        """Create semaphore ``name`` with ``limit`` permits (1: a lock), or bring
        it to that limit and ``lease`` (idempotent): what
        ``Semaphore(q, name, limit)`` does first."""
        body = {
            "name": check_lock_name(name),
            "limit": check_limit(limit),
            "lease": format_duration(check_lease(lease)),
        }
        await self._post("/v1/locks.create", body, wq.Reply)

    async def acquire_lock(
        self: Poster,
        name: str,
        client_id: str,
        *,
        limit: int | None = None,
        lease: float = DEFAULT_LEASE,
        timeout: float = 0.0,
    ) -> PermitReply:
        """Take a permit of semaphore (or lock) ``name`` for ``client_id``,
        waiting up to ``timeout`` seconds (at most 15 minutes). ``limit`` creates
        the semaphore or brings it to that limit (absent: a missing one is made
        a lock). :class:`~querator.errors.RequestTimeout` when none came free."""
        wait = check_duration("timeout", timeout, allow_zero=True)
        body: dict[str, Any] = {
            "name": name,
            "client_id": client_id,
            "lease": format_duration(check_duration("lease", lease)),
            "request_timeout": format_duration(wait),
        }
        if limit is not None:
            body["limit"] = limit
        return await self._post("/v1/locks.acquire", body, PermitReply, wait)

    async def renew_lock(self: Poster, permit: PermitReply) -> PermitReply:
        """Extend a held permit's lease; the permit at its new version (pass that
        one to the next renew or the release). :class:`~querator.errors.LockLost`
        when it was lost."""
        return await self._post("/v1/locks.renew", _held(permit), PermitReply)

    async def release_lock(self: Poster, permit: PermitReply) -> None:
        """Give a held permit back: the oldest waiter gets it at once.
        :class:`~querator.errors.LockLost` when it was lost meanwhile."""
        await self._post("/v1/locks.release", _held(permit), wq.Reply)

    async def list_locks(self: Poster) -> list[SemaphoreInfo]:
        """Every semaphore with its limit, holders and waiters."""
        return (await self._post("/v1/locks.list", {}, SemaphoresReply)).semaphores


class LockCalls:
    """The sync twins of :class:`AsyncLockCalls`, run on the client's loop."""

    def create_lock(
        self: LoopOwner, name: str, limit: int = 1, *, lease: float = DEFAULT_LEASE
    ) -> None:
        """See :meth:`AsyncLockCalls.create_lock`."""
        self.call(self.aio.create_lock, name, limit, lease=lease)

    def acquire_lock(
        self: LoopOwner,
        name: str,
        client_id: str,
        *,
        limit: int | None = None,
        lease: float = DEFAULT_LEASE,
        timeout: float = 0.0,
    ) -> PermitReply:
        """See :meth:`AsyncLockCalls.acquire_lock`."""
        permit: PermitReply = self.call(
            self.aio.acquire_lock, name, client_id, limit=limit, lease=lease, timeout=timeout
        )
        return permit

    def renew_lock(self: LoopOwner, permit: PermitReply) -> PermitReply:
        """See :meth:`AsyncLockCalls.renew_lock`."""
        renewed: PermitReply = self.call(self.aio.renew_lock, permit)
        return renewed

    def release_lock(self: LoopOwner, permit: PermitReply) -> None:
        """See :meth:`AsyncLockCalls.release_lock`."""
        self.call(self.aio.release_lock, permit)

    def list_locks(self: LoopOwner) -> list[SemaphoreInfo]:
        """See :meth:`AsyncLockCalls.list_locks`."""
        found: list[SemaphoreInfo] = self.call(self.aio.list_locks)
        return found


def _held(permit: PermitReply) -> dict[str, Any]:
    return {
        "name": permit.name,
        "id": permit.id,
        "version": permit.version,
        "permit": permit.permit,
        "token": permit.token,
    }
