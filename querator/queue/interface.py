"""The queue operations every async client has, as one typed interface.

:class:`~querator.queue.service.AsyncQueueClient` (over a store) and
:class:`querator.http.AsyncQuerator` (over ``querator serve``) both satisfy
:class:`AsyncQueueApi`; mypy checks it (tests/test_client_interface.py). Code
written against it runs on either. The sync shell
(:class:`~querator.queue.client.SyncShell`) forwards to any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self

from typing_extensions import Unpack

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
from querator.queue.options import TransactOptions
from querator.queue.plans import RefLike

__all__ = ["AsyncQueueApi"]


class AsyncQueueApi(Protocol):
    """The queue operations of an async client (see ``AsyncQuerator`` for each)."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo: ...

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo: ...

    async def delete_queue(self, name: str, *, force: bool = False) -> None: ...

    async def get_queue(self, name: str) -> QueueInfo: ...

    async def pause_queue(self, name: str) -> QueueInfo: ...

    async def resume_queue(self, name: str) -> QueueInfo: ...

    async def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]: ...

    async def produce(self, queue: str, items: Sequence[Item]) -> list[str]: ...

    async def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
        complete: Sequence[RefLike] = (),
    ) -> list[Leased]: ...

    async def complete(self, queue: str, items: Sequence[RefLike]) -> None: ...

    async def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None: ...

    async def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]: ...

    async def transact(self, **options: Unpack[TransactOptions]) -> TransactResult: ...

    async def stats(self, queue: str) -> QueueStats: ...

    async def gauges(self, queue: str, *, limit: int = ...) -> QueueGauges: ...

    async def publish_gauges(self) -> None: ...

    async def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    async def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    async def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]: ...

    async def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    async def delete_items(self, queue: str, ids: Sequence[str]) -> None: ...

    async def clear(self, queue: str, *, destructive: bool = False) -> int: ...

    async def run_maintenance(self) -> int: ...
