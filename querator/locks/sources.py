"""Where a semaphore's permits are held: in the store, for a library client
(:class:`StorePermits`: the operations of :mod:`querator.locks.store`), or
through a querator server, for an HTTP client (``/v1/locks.*``; the client
gives its own source, :class:`ServesPermits`). :class:`~querator.locks.AsyncSemaphore`
and the renewer are written once against :class:`PermitSource`."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, runtime_checkable

from querator.errors import Conflict, InvalidArgument
from querator.locks import store
from querator.locks.names import index_of, token_of
from querator.locks.permit import Permit, Taken
from querator.queue.models import Leased
from querator.queue.per_client import per_client
from querator.queue.service import AsyncQueueClient


class RenewalSink(Protocol):
    """What a source tells of each permit of a renewal (the renewer)."""

    def renewed(self, permit: Permit, current: Any, started: float) -> None:
        """``permit`` was renewed by a call sent at ``started`` (``time.monotonic()``)."""

    def lost(self, permit: Permit) -> None:
        """The source refused to renew ``permit``: its lease had lapsed."""


class PermitSource(Protocol):
    """The permit operations a semaphore needs."""

    async def create(self, name: str, limit: int, lease: float) -> None:
        """Create semaphore ``name``, or bring it to ``limit`` and ``lease`` (idempotent)."""
        ...

    async def take(self, name: str, client_id: str, timeout: float | None) -> Taken:
        """Take a free permit, waiting up to ``timeout`` seconds (None: until one
        is free); :class:`~querator.errors.RequestTimeout` when none was."""
        ...

    async def renew(self, batch: Sequence[Permit], sink: RenewalSink) -> None:
        """Extend the leases of ``batch``, telling ``sink`` of each permit as it
        is renewed or refused; any other failure raises (what was renewed
        before it has been told)."""
        ...

    async def release(self, permit: Permit) -> None:
        """Give ``permit`` back (:class:`~querator.errors.LockLost` when it was lost)."""
        ...

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``await service()`` (the renewer) until the client closes."""
        ...


@runtime_checkable
class ServesPermits(Protocol):
    """A client that holds permits through a server (``querator.http.AsyncQuerator``)."""

    def permit_source(self) -> PermitSource:
        """This client's permit source."""
        ...


class StorePermits:
    """Permits held in the store of a library client (``aq``)."""

    def __init__(self, aq: AsyncQueueClient) -> None:
        self._aq = aq

    async def create(self, name: str, limit: int, lease: float) -> None:
        """See :meth:`PermitSource.create`."""
        await store.ensure(self._aq, name, limit, lease)

    async def take(self, name: str, client_id: str, timeout: float | None) -> Taken:
        """See :meth:`PermitSource.take`."""
        leased = await store.acquire(self._aq, name, client_id, timeout)
        # the lease the store gave (another process may have set another since)
        lease = (await self._aq.queue_info(leased.queue)).settings.lease_timeout
        holder, since = store.holder_of(leased.client_id)
        token = token_of(leased.payload, leased.version)
        return Taken(leased, index_of(leased.dedup_key), token, lease, holder, since)

    async def renew(self, batch: Sequence[Permit], sink: RenewalSink) -> None:
        """See :meth:`PermitSource.renew`: one atomic ``transact`` of the batch;
        the permits it refused are lost and the others renewed at once."""
        while batch:
            started = time.monotonic()
            try:
                result = await self._aq.transact(renew=[p._current for p in batch])
            except Conflict as exc:
                refused = [p for p in batch if p._current.id in exc.reasons]
                if not refused:
                    raise
                for permit in refused:
                    sink.lost(permit)
                batch = [p for p in batch if p not in refused]
                continue
            renewed = {item.id: item for item in result.renewed}
            for permit in batch:
                sink.renewed(permit, renewed[permit._current.id], started)
            return

    async def release(self, permit: Permit) -> None:
        """See :meth:`PermitSource.release`."""
        held: Leased = permit._current
        await store.release(self._aq, permit.name, held, permit.index, permit.token)

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """See :meth:`PermitSource.run_in_background`."""
        self._aq.run_in_background(service)


def source_of(q: object) -> PermitSource:
    """The permit source of client ``q``: a library client's store, or an HTTP
    client's server."""
    if isinstance(q, AsyncQueueClient):
        return per_client(q, "permits", lambda: StorePermits(q))
    if isinstance(q, ServesPermits):
        return q.permit_source()
    raise InvalidArgument(
        "q",
        "must be a querator.AsyncQuerator or a querator.http.AsyncQuerator"
        f" (a Querator or a querator.http.Querator in sync code), got {type(q).__name__}",
    )
