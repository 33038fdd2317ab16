"""The SQLite backend: one database file shared by the threads and processes of one machine.

Every operation runs in a worker thread (``anyio.to_thread``) inside one
transaction; writers take the write lock first (``BEGIN IMMEDIATE``), so all
writes are serialised and a check can never race its change. Times are the
host clock, read once the transaction holds its lock, and are stored as
integer microseconds since the epoch. After a commit that may have made items
leasable, other processes are woken through :mod:`.wakeup`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TypeVar

import anyio.to_thread

from querator.clock import SYSTEM, Clock
from querator.errors import Unavailable
from querator.queue.backends.base import (
    Kinds,
    Leases,
    LocalCalls,
    NewItem,
    ProduceSteps,
    TxnPlan,
    WakeCallback,
    wake_only,
)
from querator.queue.backends.schema_versions import SchemaReport
from querator.queue.backends.sqlite import items as item_ops
from querator.queue.backends.sqlite import queues as queue_ops
from querator.queue.backends.sqlite.engine import Store
from querator.queue.backends.sqlite.foreign import produce_steps as foreign_steps
from querator.queue.backends.sqlite.migrations import prepare_schema
from querator.queue.backends.sqlite.rows import Txn, from_us, now_us, to_us
from querator.queue.backends.sqlite.transact import transact
from querator.queue.backends.sqlite.wakeup import Wakeup
from querator.queue.models import (
    PartitionGauges,
    PartitionStats,
    QueueInfo,
    QueueSettings,
    StoredItem,
    TransactResult,
)

__all__ = ["SqliteBackend"]

T = TypeVar("T")


class SqliteBackend(LocalCalls):
    """A :class:`~querator.queue.backends.base.Backend` on one SQLite database file."""

    supports_notify: bool
    """True where UNIX sockets carry wakeups between processes."""

    def __init__(self, path: str, clock: Clock = SYSTEM) -> None:
        self.path = path
        """The database file; created (with its directory) on :meth:`open`."""
        self._clock = clock
        self._wakeup = Wakeup(path)
        self.supports_notify = self._wakeup.supported
        self._store: Store | None = None

    async def _call(self, op: Callable[[Txn], T], *, write: bool, queue: str | None = None) -> T:
        store = self._store
        if store is None:
            raise Unavailable("the SQLite backend is not open")
        return await anyio.to_thread.run_sync(partial(store.run, op, write=write, queue=queue))

    # -- lifecycle ----------------------------------------------------------
    async def open(self) -> None:
        """Open the file (creating it and its directory), and create the catalog or
        migrate it to the newest version; SchemaTooNew for a file a newer querator
        migrated beyond what this one can use (:mod:`.migrations`)."""
        if self._store is not None:
            return
        await anyio.to_thread.run_sync(self._open)

    def _open(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise Unavailable(f"cannot create {directory!r}: {exc}") from exc
        store = Store(self.path, self._wakeup.notify, self._clock)
        try:
            store.run(partial(self._prepare, apply=True), write=True)
        except BaseException:
            store.close()
            raise
        self._store = store

    def _prepare(self, txn: Txn, apply: bool) -> SchemaReport:
        return prepare_schema(txn.conn, f"SQLite store {self.path!r}", apply)

    async def migrate(self, apply: bool) -> SchemaReport:
        """Create or migrate the catalog (or, unless ``apply``, say what that would
        do) without opening the backend."""

        def run() -> SchemaReport:
            store = Store(self.path, lambda queues: None, self._clock)
            try:
                return store.run(partial(self._prepare, apply=apply), write=True)
            finally:
                store.close()

        return await anyio.to_thread.run_sync(run)

    async def close(self) -> None:
        """Release the connections and the wakeup socket; the file keeps its data."""
        store, self._store = self._store, None
        if store is not None:
            await anyio.to_thread.run_sync(store.close)
        self._wakeup.close()

    async def listen(self, on_wake: WakeCallback, on_ready: Callable[[], None]) -> None:
        """Deliver wakeups from other processes until cancelled (returns at once without)."""
        await self._wakeup.listen(on_wake, on_ready)

    # -- queues -------------------------------------------------------------
    async def create_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Create the queue and its partition tables; QueueExists if taken."""
        return await self._call(
            partial(queue_ops.create_queue, name=name, settings=settings), write=True
        )

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Store new settings, creating added partitions; QueueNotFound if absent."""
        return await self._call(
            partial(queue_ops.update_queue, name=name, settings=settings), write=True
        )

    async def pause_queue(self, name: str, paused: bool) -> QueueInfo:
        """Mark the queue paused (or not) and wake every client of the file."""
        op = partial(queue_ops.pause_queue, name=name, paused=paused)
        return await self._call(op, write=True)

    async def delete_queue(self, name: str, force: bool) -> None:
        """Drop the queue and its tables; QueueNotFound if absent, QueueNotEmpty
        if it holds items and not ``force``."""
        await self._call(partial(queue_ops.delete_queue, name=name, force=force), write=True)

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's info; QueueNotFound if absent."""
        return await self._call(partial(queue_ops.get_queue, name=name), write=False)

    async def list_queues(self, pivot: str | None, limit: int) -> list[QueueInfo]:
        """Queues with name >= pivot, by name, at most ``limit``."""
        op = partial(queue_ops.list_queues, pivot=pivot, limit=limit)
        return await self._call(op, write=False)

    async def queues_with_dead_queue(self, dead_queue: str) -> list[str]:
        """Names of queues whose settings name ``dead_queue``."""
        op = partial(queue_ops.queues_with_dead_queue, dead_queue=dead_queue)
        return await self._call(op, write=False)

    # -- items --------------------------------------------------------------
    def produce_steps(self, queue: QueueInfo, items: Sequence[NewItem]) -> ProduceSteps:
        """The statements that insert items on the application's own connection
        to this file (see :mod:`querator.queue.backends.sqlite.foreign`)."""
        given = self._clock.store_now()
        now = now_us() if given is None else to_us(given)
        return foreign_steps(self.path, queue, items, now)

    async def produce(self, queue: QueueInfo, items: Sequence[NewItem]) -> list[str]:
        """Insert items; returns ids in order. A dedup_key already held returns that id."""
        op = partial(item_ops.produce_items, queue=queue, items=items)
        return await self._call(op, write=True, queue=queue.name)

    async def lease(
        self, queue: QueueInfo, partition: int, client_id: str, limit: int, kinds: Kinds = None
    ) -> Leases:
        """Lease up to ``limit`` leasable items of one partition (of ``kinds``), in order."""
        op = partial(
            item_ops.lease,
            queue=queue,
            partition=partition,
            client_id=client_id,
            limit=limit,
            kinds=kinds,
        )
        return await self._call(op, write=True, queue=queue.name)

    async def next_available_at(self, queue: QueueInfo, kinds: Kinds = None) -> datetime | None:
        """Earliest ``available_at`` of any item (of ``kinds``) that could become
        leasable, or None."""
        op = partial(item_ops.next_available_at, queue=queue, kinds=kinds)
        micros = await self._call(op, write=False, queue=queue.name)
        return None if micros is None else from_us(micros)

    async def transact(self, plan: TxnPlan) -> TransactResult:
        """Apply the plan atomically or raise Conflict listing every failed check.
        A plan that only wakes names writes nothing: its wakeup is sent at once."""
        if wake_only(plan):
            if self._store is None:
                raise Unavailable("the SQLite backend is not open")
            self._wakeup.notify(plan.wake)
            return TransactResult.model_construct(
                produced={}, renewed=[], leased={}, found={}, held_for={}
            )
        return await self._call(partial(transact, plan=plan), write=True)

    async def dead_letter_due(self, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
        """Move up to ``limit`` exhausted or expired, unheld items; returns how many."""
        op = partial(item_ops.dead_letter_due, queue=queue, dead=dead, limit=limit)
        return await self._call(op, write=True, queue=queue.name)

    async def claim_maintenance(self, interval: float) -> bool:
        """True for exactly one caller per ``interval`` seconds across all clients."""
        op = partial(queue_ops.claim_maintenance, interval=interval)
        return await self._call(op, write=True)

    async def stats(self, queue: QueueInfo) -> list[PartitionStats]:
        """Counts per partition."""
        return await self._call(partial(item_ops.stats, queue=queue), write=False, queue=queue.name)

    async def gauges(self, queue: QueueInfo, limit: int) -> list[PartitionGauges]:
        """Bounded probes per partition (the seq span past ``limit``)."""
        op = partial(item_ops.gauges, queue=queue, limit=limit)
        return await self._call(op, write=False, queue=queue.name)

    async def list_items(
        self,
        queue: QueueInfo,
        partition: int,
        pivot_seq: int | None,
        limit: int,
        scheduled_only: bool,
    ) -> list[StoredItem]:
        """Items of one partition with seq >= pivot_seq, by seq."""
        op = partial(
            item_ops.list_items,
            queue=queue,
            partition=partition,
            pivot_seq=pivot_seq,
            limit=limit,
            scheduled_only=scheduled_only,
        )
        return await self._call(op, write=False, queue=queue.name)

    async def lookup(self, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
        """The items (in any partition) holding any of ``dedup_keys``."""
        op = partial(item_ops.lookup, queue=queue, dedup_keys=dedup_keys)
        return await self._call(op, write=False, queue=queue.name)

    async def scan_keys(
        self, queue: QueueInfo, low: str, include_low: bool, high: str | None, limit: int
    ) -> list[StoredItem]:
        """Items by dedup key in the range, from each partition's dedup-key index."""
        op = partial(
            item_ops.scan_keys,
            queue=queue,
            low=low,
            include_low=include_low,
            high=high,
            limit=limit,
        )
        return await self._call(op, write=False, queue=queue.name)

    async def delete_items(self, queue: QueueInfo, keys: Sequence[tuple[str, int, int]]) -> None:
        """Delete (id, partition, seq) items; Conflict (MISSING) lists absent ones."""
        op = partial(item_ops.delete_items, queue=queue, keys=keys)
        await self._call(op, write=True, queue=queue.name)

    async def clear(self, queue: QueueInfo, destructive: bool) -> int:
        """Delete unheld items (or all when destructive); returns how many."""
        op = partial(item_ops.clear, queue=queue, destructive=destructive)
        return await self._call(op, write=True, queue=queue.name)
