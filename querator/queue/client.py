"""The sync client: every call runs :class:`AsyncQueueClient`'s code on a private
event loop thread (:class:`~querator.queue.loop_thread.LoopThread`), except the
common cases of the hot calls, which :mod:`querator.queue.hot_calls` runs on
the calling thread with the same checks, plans and statements. There is one
implementation of each operation; this file only forwards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Self

from typing_extensions import TypeVar, Unpack

from querator.errors import UsageError
from querator.queue.interface import AsyncQueueApi
from querator.queue.loop_thread import LoopThread
from querator.queue.models import (
    Item,
    Leased,
    QueueGauges,
    QueueInfo,
    QueueSettings,
    QueueStats,
    StoredItem,
    TransactResult,
)
from querator.queue.options import DEFAULT_URL, ClientOptions, TransactOptions
from querator.queue.plans import RefLike
from querator.queue.service import AsyncQueueClient

T = TypeVar("T")
A_co = TypeVar("A_co", bound=AsyncQueueApi, covariant=True)
"""The async client a sync shell forwards to."""


class SyncShell(Generic[A_co]):
    """The sync shell of an async client ``A``: every call runs ``A``'s coroutine
    on a private event loop thread; safe across threads.

    It is open once constructed; use it as a context manager or call
    :meth:`close`. Calling it from inside a running event loop raises
    :class:`~querator.errors.UsageError`: use the async client there.
    """

    def __init__(self, build: Callable[[], A_co]) -> None:
        """``build()`` makes the async client (on the shell's loop: it may bind
        loop-local state); the shell opens it and closes it with itself."""
        self._thread: LoopThread | None = LoopThread()
        try:
            self._async: A_co = self._thread.call(_build, build)
            self._leave = self._thread.enter(self._async)
        except BaseException:
            self._thread.stop()
            raise

    @property
    def aio(self) -> A_co:
        """The async client this one forwards to (usable on its portal's loop only)."""
        return self._async

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop background work and release connections. Data stays stored."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            self._leave()
        finally:
            thread.stop()

    def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self._thread_for(fn).call(fn, *args, **kwargs)

    def _thread_for(self, fn: Callable[..., Awaitable[Any]]) -> LoopThread:
        """The loop thread to run ``fn`` on (UsageError in a running event loop,
        or once the client is closed)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            name = getattr(fn, "__name__", "this method")
            raise UsageError(
                f"Querator.{name}() called inside a running event loop; "
                f"use `await AsyncQuerator.{name}()` instead"
            )
        thread = self._thread
        if thread is None:
            raise UsageError("the client is closed")
        return thread

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``await fn(*args, **kwargs)`` on this client's event loop and return
        its result: how sync APIs are built on top of :attr:`aio`."""
        return self._call(fn, *args, **kwargs)

    def serve(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run a long-running ``await fn(*args)`` (a worker's ``arun``) on this
        client's event loop until it returns, like :meth:`call`; the waiting
        thread wakes every 0.1 s, so the main thread's signal handlers always
        get to run while it waits."""
        return self._thread_for(fn).serve(fn, *args)

    def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo:
        """See :meth:`AsyncQueueClient.create_queue`."""
        return self._call(self._async.create_queue, name, settings, exist_ok=exist_ok)

    def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """See :meth:`AsyncQueueClient.update_queue`."""
        return self._call(self._async.update_queue, name, settings)

    def delete_queue(self, name: str, *, force: bool = False) -> None:
        """See :meth:`AsyncQueueClient.delete_queue`."""
        return self._call(self._async.delete_queue, name, force=force)

    def get_queue(self, name: str) -> QueueInfo:
        """See :meth:`AsyncQueueClient.get_queue`."""
        return self._call(self._async.get_queue, name)

    def pause_queue(self, name: str) -> QueueInfo:
        """See :meth:`AsyncQueueClient.pause_queue`."""
        return self._call(self._async.pause_queue, name)

    def resume_queue(self, name: str) -> QueueInfo:
        """See :meth:`AsyncQueueClient.resume_queue`."""
        return self._call(self._async.resume_queue, name)

    def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """See :meth:`AsyncQueueClient.list_queues`."""
        return self._call(self._async.list_queues, pivot, limit)

    def produce(self, queue: str, items: Sequence[Item]) -> list[str]:
        """See :meth:`AsyncQueueClient.produce`."""
        return self._call(self._async.produce, queue, items)

    def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
        complete: Sequence[RefLike] = (),
    ) -> list[Leased]:
        """See :meth:`AsyncQueueClient.lease`."""
        leased, complete = self._lease_here(queue, client_id, batch_size, timeout, kinds, complete)
        if leased is not None:
            return leased
        return self._call(
            self._async.lease,
            queue,
            client_id=client_id,
            batch_size=batch_size,
            timeout=timeout,
            kinds=kinds,
            complete=complete,
        )

    def _lease_here(self, *call: Any) -> tuple[list[Leased] | None, Sequence[RefLike]]:
        """:meth:`lease` on the calling thread, where the shell can (``call``: its
        arguments in order): the items, or None for the loop to lease; and what
        of ``complete`` (the last argument) is left to do. Here: nothing is done."""
        return None, call[-1]

    def complete(self, queue: str, items: Sequence[RefLike]) -> None:
        """See :meth:`AsyncQueueClient.complete`."""
        return self._call(self._async.complete, queue, items)

    def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None:
        """See :meth:`AsyncQueueClient.retry`."""
        return self._call(
            self._async.retry, queue, items, retry_at=retry_at, dead=dead, reason=reason
        )

    def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]:
        """See :meth:`AsyncQueueClient.renew`."""
        return self._call(self._async.renew, queue, items, extend=extend)

    def transact(self, **options: Unpack[TransactOptions]) -> TransactResult:
        """See :meth:`AsyncQueueClient.transact`."""
        return self._call(self._async.transact, **options)

    def stats(self, queue: str) -> QueueStats:
        """See :meth:`AsyncQueueClient.stats`."""
        return self._call(self._async.stats, queue)

    def gauges(self, queue: str, *, limit: int = 10_000) -> QueueGauges:
        """See :meth:`AsyncQueueClient.gauges`."""
        return self._call(self._async.gauges, queue, limit=limit)

    def publish_gauges(self) -> None:
        """See :meth:`AsyncQueueClient.publish_gauges`."""
        self._call(self._async.publish_gauges)

    def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`AsyncQueueClient.list_items`."""
        return self._call(
            self._async.list_items, queue, partition=partition, pivot=pivot, limit=limit
        )

    def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`AsyncQueueClient.list_scheduled`."""
        return self._call(
            self._async.list_scheduled, queue, partition=partition, pivot=pivot, limit=limit
        )

    def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        """See :meth:`AsyncQueueClient.lookup`."""
        return self._call(self._async.lookup, queue, dedup_keys)

    def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`AsyncQueueClient.scan_keys`."""
        return self._call(self._async.scan_keys, queue, prefix, after=after, limit=limit)

    def delete_items(self, queue: str, ids: Sequence[str]) -> None:
        """See :meth:`AsyncQueueClient.delete_items`."""
        return self._call(self._async.delete_items, queue, ids)

    def clear(self, queue: str, *, destructive: bool = False) -> int:
        """See :meth:`AsyncQueueClient.clear`."""
        return self._call(self._async.clear, queue, destructive=destructive)

    def run_maintenance(self) -> int:
        """See :meth:`AsyncQueueClient.run_maintenance`."""
        return self._call(self._async.run_maintenance)


async def _build(build: Callable[[], A_co]) -> A_co:
    """Construct the async client on its loop (it may bind loop-local state)."""
    return build()


class QueueClient(SyncShell[AsyncQueueClient]):
    """A client of one queue store, for ordinary (sync) code; safe across threads.

    Same arguments and methods as :class:`AsyncQueueClient`, without ``await``.
    It is open once constructed; use it as a context manager or call
    :meth:`close`. Calling it from inside a running event loop raises
    :class:`~querator.errors.UsageError`: use ``AsyncQueueClient`` there.
    """

    _async_class: type[AsyncQueueClient] = AsyncQueueClient
    """The async client this class forwards to (a subclass may extend both)."""

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[ClientOptions]) -> None:
        super().__init__(lambda: self._async_class(url, **options))
        assert self._thread is not None
        self._hot = self._async._hot_path(self._thread.loop)

    # The hot calls run on the calling thread where the store lets them
    # (:mod:`querator.queue.hot_calls`), else on the loop as every other call.

    def produce(self, queue: str, items: Sequence[Item]) -> list[str]:
        """See :meth:`AsyncQueueClient.produce`."""
        self._thread_for(self._async.produce)
        ids = self._hot.produce(queue, items)
        return ids if ids is not None else self._call(self._async.produce, queue, items)

    def _lease_here(self, *call: Any) -> tuple[list[Leased] | None, Sequence[RefLike]]:
        """:meth:`lease` on the calling thread (:meth:`.hot_calls.HotPath.lease`)."""
        self._thread_for(self._async.lease)
        return self._hot.lease(*call)

    def complete(self, queue: str, items: Sequence[RefLike]) -> None:
        """See :meth:`AsyncQueueClient.complete`."""
        self._thread_for(self._async.complete)
        if not self._hot.complete(queue, items):
            self._call(self._async.complete, queue, items)

    def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None:
        """See :meth:`AsyncQueueClient.retry`."""
        self._thread_for(self._async.retry)
        if not self._hot.retry(queue, items, retry_at, dead, reason):
            self._call(self._async.retry, queue, items, retry_at=retry_at, dead=dead, reason=reason)

    def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]:
        """See :meth:`AsyncQueueClient.renew`."""
        self._thread_for(self._async.renew)
        renewed = self._hot.renew(queue, items, extend)
        if renewed is not None:
            return renewed
        return self._call(self._async.renew, queue, items, extend=extend)
