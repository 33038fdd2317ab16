"""One typed interface for every client: the library's (over a store) and
the HTTP clients (over ``querator serve``).

``querator.AsyncQuerator`` and ``querator.http.AsyncQuerator`` both satisfy
:class:`AsyncClient`; ``querator.Querator`` and ``querator.http.Querator``
both satisfy :class:`Client` (mypy checks it: tests/test_client_interface.py).
Code typed against them drives queues, workflow runs, schedules, webhooks,
dead letters and the messages, events and streams of runs the same way, with
or without database access (docs/http-api.md lists every operation with its
endpoint)::

    from querator.interface import Client

    def ship(q: Client, order_id: str) -> None:
        q.start(ship_order, order_id).result(timeout=60)   # a @workflow
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

from typing_extensions import Unpack

from querator.queue.interface import AsyncQueueApi
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
from querator.webhooks.api import AsyncWebhooks, Webhooks
from querator.workflows.attributes import AttributeValue
from querator.workflows.checking import ReplayCheck
from querator.workflows.cron.api import ScheduleInfo, ScheduleOptions
from querator.workflows.functions import DurableFunction, WorkflowFunction
from querator.workflows.run_models import RunInfo
from querator.workflows.stored import RunStatus
from querator.workflows.streams import StreamPage

__all__ = ["AsyncClient", "AsyncQueueApi", "AsyncRun", "Client", "Run"]

R_co = TypeVar("R_co", covariant=True)


class AsyncRun(Protocol[R_co]):
    """A started run, for async code (``AsyncRunHandle`` and the HTTP run)."""

    @property
    def run_id(self) -> str: ...

    async def status(self) -> RunStatus: ...

    async def result(self, timeout: float | None = None) -> R_co: ...

    async def cancel(self, reason: str = "") -> bool: ...

    async def retry_compensation(self) -> bool: ...


class Run(Protocol[R_co]):
    """A started run, for sync code (``RunHandle`` and the HTTP run)."""

    @property
    def run_id(self) -> str: ...

    def status(self) -> RunStatus: ...

    def result(self, timeout: float | None = None) -> R_co: ...

    def cancel(self, reason: str = "") -> bool: ...

    def retry_compensation(self) -> bool: ...


class AsyncClient(AsyncQueueApi, Protocol):
    """Every operation of an async client: queues (:class:`AsyncQueueApi`),
    workflow runs, schedules, webhooks, dead letters, and messages, events and
    streams of runs."""

    @property
    def webhooks(self) -> AsyncWebhooks: ...

    async def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> AsyncRun[Any]: ...

    async def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> AsyncRun[Any]: ...

    def run(self, run_id: str) -> AsyncRun[Any]: ...

    async def get_run(self, run_id: str) -> RunInfo: ...

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        since: datetime | None = None,
        after: str | None = None,
        limit: int = 100,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> list[RunInfo]: ...

    async def resume(self, run_id: str) -> bool: ...

    async def fork(self, run_id: str, from_step: int = 0) -> AsyncRun[Any]: ...

    async def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None: ...

    async def list_schedules(self) -> list[ScheduleInfo]: ...

    async def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int: ...

    async def reindex_runs(self) -> int: ...

    async def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck: ...

    async def get_schedule(self, name: str) -> ScheduleInfo: ...

    async def pause_schedule(self, name: str, note: str = "") -> None: ...

    async def resume_schedule(self, name: str) -> None: ...

    async def delete_schedule(self, name: str) -> bool: ...

    async def trigger_schedule(self, name: str) -> AsyncRun[Any]: ...

    async def dead_letters(self, queue: str, limit: int | None = None) -> list[StoredItem]: ...

    async def dead_letter(self, queue: str, item_id: str) -> StoredItem: ...

    async def requeue(self, queue: str, ids: Sequence[str] | None = None) -> int: ...

    async def purge(self, queue: str, ids: Sequence[str] | None = None) -> int: ...

    async def send(
        self, run_id: str, topic: str, value: Any, idempotency_key: str | None = None
    ) -> None: ...

    async def emit_event(self, name: str, payload: Any) -> bool: ...

    async def get_event(self, run_id: str, key: str, timeout: float = 0.0) -> Any: ...

    async def read_stream_page(
        self, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage: ...

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> AsyncIterator[Any]: ...


class Client(Protocol):
    """Every operation of a sync client: queues, workflow runs, schedules,
    webhooks, dead letters, and messages, events and streams of runs."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def close(self) -> None: ...

    @property
    def webhooks(self) -> Webhooks: ...

    def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> Run[Any]: ...

    def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> Run[Any]: ...

    def run(self, run_id: str) -> Run[Any]: ...

    def get_run(self, run_id: str) -> RunInfo: ...

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        since: datetime | None = None,
        after: str | None = None,
        limit: int = 100,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> list[RunInfo]: ...

    def resume(self, run_id: str) -> bool: ...

    def fork(self, run_id: str, from_step: int = 0) -> Run[Any]: ...

    def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None: ...

    def list_schedules(self) -> list[ScheduleInfo]: ...

    def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int: ...

    def reindex_runs(self) -> int: ...

    def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck: ...

    def get_schedule(self, name: str) -> ScheduleInfo: ...

    def pause_schedule(self, name: str, note: str = "") -> None: ...

    def resume_schedule(self, name: str) -> None: ...

    def delete_schedule(self, name: str) -> bool: ...

    def trigger_schedule(self, name: str) -> Run[Any]: ...

    def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo: ...

    def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo: ...

    def delete_queue(self, name: str, *, force: bool = False) -> None: ...

    def get_queue(self, name: str) -> QueueInfo: ...

    def pause_queue(self, name: str) -> QueueInfo: ...

    def resume_queue(self, name: str) -> QueueInfo: ...

    def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]: ...

    def produce(self, queue: str, items: Sequence[Item]) -> list[str]: ...

    def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
        complete: Sequence[RefLike] = (),
    ) -> list[Leased]: ...

    def complete(self, queue: str, items: Sequence[RefLike]) -> None: ...

    def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None: ...

    def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]: ...

    def transact(self, **options: Unpack[TransactOptions]) -> TransactResult: ...

    def stats(self, queue: str) -> QueueStats: ...

    def gauges(self, queue: str, *, limit: int = ...) -> QueueGauges: ...

    def publish_gauges(self) -> None: ...

    def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]: ...

    def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]: ...

    def delete_items(self, queue: str, ids: Sequence[str]) -> None: ...

    def clear(self, queue: str, *, destructive: bool = False) -> int: ...

    def run_maintenance(self) -> int: ...

    def dead_letters(self, queue: str, limit: int | None = None) -> list[StoredItem]: ...

    def dead_letter(self, queue: str, item_id: str) -> StoredItem: ...

    def requeue(self, queue: str, ids: Sequence[str] | None = None) -> int: ...

    def purge(self, queue: str, ids: Sequence[str] | None = None) -> int: ...

    def send(
        self, run_id: str, topic: str, value: Any, idempotency_key: str | None = None
    ) -> None: ...

    def emit_event(self, name: str, payload: Any) -> bool: ...

    def get_event(self, run_id: str, key: str, timeout: float = 0.0) -> Any: ...

    def read_stream_page(
        self, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage: ...

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> Iterator[Any]: ...
