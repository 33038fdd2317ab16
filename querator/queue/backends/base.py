"""The storage seam: what every backend does, and nothing more.

A backend stores and changes items atomically. It knows nothing of routing
items to partitions, of validating user input or of long-polling: the queue
service (:mod:`querator.queue.service`) does that, and hands the backend
resolved, validated parameter objects. Records come back frozen.

Conventions every backend keeps:

* Time is the store's clock (``now()`` on PostgreSQL; the host clock for
  SQLite and memory). Durations arrive as seconds.
* An item is *leasable* when ``available_at <= now`` and it has attempts left
  (``max_attempts == 0 or attempts < max_attempts``) and ``expire_at > now``.
  A produced item's ``expire_at`` counts from when it becomes available:
  ``max(enqueue_at, now) + expire_timeout``.
  Leasing orders by ``(available_at, seq)``, sets ``available_at`` and
  ``lease_deadline`` to ``now + lease_timeout``, sets ``client_id``, and bumps
  ``attempts`` and ``version``.
* An item is *held* when ``lease_deadline is not None and lease_deadline > now``.
  complete/retry/renew need the item held under exactly the given version.
  Retry clears ``lease_deadline`` and ``client_id``, sets ``available_at`` to
  ``retry_at`` or now, and bumps ``version``. Renew sets ``lease_deadline`` and
  ``available_at`` to ``now + extend`` and bumps ``version``.
* Dead-lettering moves an item into the dead queue's partition
  ``partition % dead.partitions`` as a new item (new id, version 1, attempts 0,
  available now, ``source_id`` = old id, the marks of
  :mod:`querator.queue.dead_reasons` added to its headers, ``expire_at`` by the dead queue's
  ``dead_letter_expiry``, else :data:`~querator.queue.models.KEPT`) and deletes the
  source row, in one transaction; with no dead queue the item is deleted.
  A retry of an item whose attempts are used up dead-letters it at once.
* Every change that can make an item leasable (produce, retry, dead-letter
  arrival) wakes waiters in other processes: PostgreSQL with ``pg_notify`` in
  the same transaction, SQLite with its cross-process wakeup after commit.
  The payload of a wakeup is the queue's name.
* Driver errors are wrapped in :class:`querator.errors.Unavailable` (or the
  precise querator error) with ``from``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, NamedTuple, Protocol

from querator.errors import InvalidArgument
from querator.queue.backends.schema_versions import SchemaReport
from querator.queue.models import (
    Leased,
    PartitionGauges,
    PartitionStats,
    QueueInfo,
    QueueSettings,
    StoredItem,
    TransactResult,
)

Kinds = tuple[str, ...] | None
"""A lease's kind filter: only items of these kinds (sorted, not empty), or None: any."""

WakeCallback = Callable[[str], None]
"""Called with a queue name when that queue may have become leasable, or with
:func:`settings_wake` of a queue whose catalog entry changed (paused, resumed)."""

SETTINGS_WAKE: Final = "settings:"
"""The prefix of a wakeup that says a queue's catalog entry changed: queue names
never hold ``:``, so it cannot be taken for a queue's wakeup."""


def settings_wake(queue: str) -> str:
    """The wakeup that tells every client of the store that ``queue``'s catalog
    entry changed (clients drop their cached info of it and wake its waiters)."""
    return SETTINGS_WAKE + queue


def changed_settings(wakeup: str) -> str | None:
    """The queue a :func:`settings_wake` names, or None for a queue's wakeup."""
    return wakeup[len(SETTINGS_WAKE) :] if wakeup.startswith(SETTINGS_WAKE) else None


@dataclass(frozen=True, slots=True)
class NewItem:
    """A validated item routed to a partition, ready to insert."""

    partition: int
    payload: bytes
    kind: str = ""
    encoding: str = ""
    reference: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    available_at: datetime | None = None
    """None means the store's now."""
    dedup_key: str | None = None
    priority: int = 0
    """Higher is leased first among ready items (``Item.priority``)."""


class Leases(NamedTuple):
    """The items one lease took, and how long each had been waiting for it."""

    items: list[Leased]
    waited: list[float]
    """Per item, in order: seconds from its ``available_at`` before this lease to
    the lease (the store's clock), the lease-wait metric's observation."""


class TableRefs(NamedTuple):
    """Held items of one partition table of one queue, named by ``seqs`` at
    ``versions`` (in the caller's order): what a one-table complete or retry
    changes in one statement (built by :func:`querator.queue.plans.one_table_refs`)."""

    queue: str
    queue_id: int
    partition: int
    seqs: list[int]
    versions: list[int]


class LeasedBatch(list[Leased]):
    """The items of a lease of one partition table, as a list, that remembers
    their rows' seqs and versions (:class:`TableRefs`): completing, retrying or
    renewing the batch as it was leased then names the rows without reading the
    items' ids (:func:`querator.queue.plans.one_table_refs`). A backend may
    return one as :attr:`Leases.items`; it is a list like any other."""

    __slots__ = ("_leased", "_refs")

    def __init__(self, items: list[Leased], refs: TableRefs) -> None:
        super().__init__(items)
        self._leased = tuple(items)
        self._refs = refs

    def refs(self, queue: str, queue_id: int) -> TableRefs | None:
        """The rows of this batch of ``queue`` (its internal ``queue_id``) while it
        holds what was leased: the same records in the same order; None once
        it was changed, or for another queue."""
        refs, leased = self._refs, self._leased
        if (
            refs.queue != queue
            or refs.queue_id != queue_id
            or len(self) != len(leased)
            or not all(map(operator.is_, self, leased))
        ):
            return None
        return refs


class ItemKey(NamedTuple):
    """A resolved reference to one item version (a tuple: built per item, cheaply)."""

    queue: str
    id: str
    queue_id: int
    partition: int
    seq: int
    version: int

    @property
    def lock_order(self) -> tuple[int, int, int]:
        """The deterministic order in which transactions lock rows."""
        return (self.queue_id, self.partition, self.seq)


@dataclass(frozen=True, slots=True)
class RetryOp:
    """Retry one held item: later (``retry_at``), now, or into the dead queue."""

    key: ItemKey
    retry_at: datetime | None = None
    dead: bool = False
    reason: str | None = None
    """Why, should this retry dead-letter the item (:mod:`querator.queue.dead_reasons`)."""


@dataclass(frozen=True, slots=True)
class RenewOp:
    """Extend the lease of one held item to ``now + extend`` seconds."""

    key: ItemKey
    extend: float


@dataclass(frozen=True, slots=True)
class TxnPlan:
    """Everything one atomic transaction does; validated by the service.

    No item appears in more than one of complete/retry/renew/depends/delete.
    """

    queues: Mapping[str, QueueInfo]
    """Every queue named below, and each one's dead queue, by name."""
    complete: Sequence[ItemKey] = ()
    retry: Sequence[RetryOp] = ()
    renew: Sequence[RenewOp] = ()
    depends: Sequence[ItemKey] = ()
    """Pure version checks: the item must exist at this version (held or not)."""
    delete: Sequence[ItemKey] = ()
    """Items deleted if they exist at this version and no live lease holds them
    (else ``ConflictReason.LEASED``, and nothing of the plan happens)."""
    produce: Sequence[tuple[str, Sequence[NewItem]]] = ()
    """(queue name, items) pairs; ids come back per queue in order."""
    claim: Sequence[tuple[str, Sequence[NewItem]]] = ()
    """(queue name, items) produced like ``produce``, then each one leasable at once
    (not scheduled later, not held by another client: a dedup hit may be either)
    is leased to ``client_id`` for its queue's ``lease_timeout``; ``TransactResult.leased``
    holds per queue, in order, the leased item or None."""
    client_id: str | None = None
    """Who leases the ``claim`` items (set whenever ``claim`` is)."""
    lookup: Sequence[tuple[str, Sequence[str]]] = ()
    """(queue name, dedup keys) to look up once the rest is applied. A backend that
    answers them itself puts them in ``TransactResult.found``; the service looks
    up whatever it left out right after the transaction."""
    silent: frozenset[str] = frozenset()
    """Queues this transaction does not wake (no notification, no local wakeup)."""
    wake: frozenset[str] = frozenset()
    """Names to wake at commit besides the queues it changes (a waiter that
    watches a name of its own: the locks' wake-one hand-off)."""
    durable: bool = True
    """False: the commit does not wait for its flush to disk (PostgreSQL's
    asynchronous commit; the other stores ignore it). Only for changes whose
    loss in a server crash is harmless: any later durable commit that saw them
    flushes them first (the log is flushed in order)."""


def wake_only(plan: TxnPlan) -> bool:
    """True when ``plan`` changes and checks nothing: it only wakes its names
    (``commit(wake=[...])`` alone, a notification of its own)."""
    return bool(plan.wake) and not (
        plan.complete
        or plan.retry
        or plan.renew
        or plan.depends
        or plan.delete
        or plan.produce
        or plan.claim
        or plan.lookup
    )


@dataclass(frozen=True, slots=True)
class InsertPlan:
    """How a produce batch maps onto partitions (shared by the SQL backends)."""

    by_partition: dict[int, list[int]]
    """Indexes of the items to insert, per partition, in input order."""
    repeats: dict[int, int]
    """Index of an item whose dedup key an earlier item of the batch holds -> that index."""

    @classmethod
    def of(cls, items: Sequence[NewItem]) -> InsertPlan:
        """Group ``items`` by partition; later repeats of a dedup key are not inserted."""
        first_with_key: dict[str, int] = {}
        repeats: dict[int, int] = {}
        by_partition: dict[int, list[int]] = {}
        for index, new in enumerate(items):
            if new.dedup_key is not None:
                first = first_with_key.setdefault(new.dedup_key, index)
                if first != index:
                    repeats[index] = first
                    continue
            by_partition.setdefault(new.partition, []).append(index)
        return cls(by_partition, repeats)

    def ids_in_order(self, ids: list[str | None]) -> list[str]:
        """Fill the repeats' ids from their first occurrences; ids in input order."""
        for index, first in self.repeats.items():
            ids[index] = ids[first]
        return [item_id for item_id in ids if item_id is not None]


def refuse_foreign(store: str) -> InvalidArgument:
    """The error of :meth:`Backend.produce_steps` on a store that cannot produce
    inside the application's own transaction."""
    return InvalidArgument(
        "connection",
        f"{store} cannot produce inside the application's own transaction: that needs"
        " PostgreSQL or SQLite (defer without connection= to produce on querator's own)",
    )


ProduceSteps = Generator[tuple[Any, Any], list[tuple[Any, ...]], list[str]]
"""A produce written sans I/O: yields each statement with its parameters,
receives its rows, returns the ids in input order."""


class SyncHotCalls(Protocol):
    """A backend's hot calls for sync callers, run on the calling thread
    (PostgreSQL: :mod:`.postgres.sync_calls`); the same statements as the
    backend's async calls, on a session the calling thread holds."""

    def usable(self) -> bool:
        """Whether the hot calls may run here now; when not, use the async calls."""
        ...

    def lease(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds,
        done: TableRefs | None = None,
    ) -> Leases | None:
        """:meth:`Backend.lease`, completing the held items ``done`` first (as
        :meth:`complete`, in the same round trip where the store can); None
        when a check of ``done`` failed: nothing changed, nothing leased."""
        ...

    def complete(self, refs: TableRefs, now: datetime | None) -> bool:
        """Complete held items of one partition table in one statement; False
        when a check failed (nothing changed): then :meth:`Backend.transact`
        must run the plan, and names the reasons."""
        ...

    def retry(self, refs: TableRefs, retry_at: datetime | None, now: datetime | None) -> bool:
        """Retry held items of one partition table of a queue without an
        attempts limit to ``retry_at`` (None: now) in one statement, waking the
        queue; False when the store cannot or a check failed (nothing changed):
        then :meth:`Backend.transact` must run the plan."""
        ...

    def renew(
        self, queue: QueueInfo, refs: TableRefs, extend: float, now: datetime | None
    ) -> list[Leased] | None:
        """Extend the leases of held items of one partition table of ``queue`` to
        now + ``extend`` seconds in one statement: the renewed items in ``refs``'
        order, or None when the store cannot or a check failed (nothing
        changed): then :meth:`Backend.transact` must run the plan."""
        ...

    def insert_unkeyed(
        self, queue: QueueInfo, items: Sequence[NewItem], now: datetime | None
    ) -> list[str]:
        """:meth:`Backend.produce` of items without dedup keys."""
        ...


class LocalCalls:
    """The calls of :class:`Backend` that only a store across a network has:
    a local store (memory, SQLite) has no round trips to save, so its sync
    client runs every call on its event loop thread and its completes run as
    transactions (:meth:`Backend.transact`)."""

    def sync_calls(self) -> None:
        """None: every call of a sync client runs on its event loop thread."""
        return None

    async def complete_table(self, refs: TableRefs) -> bool:
        """False: a complete runs as a transaction (:meth:`Backend.transact`)."""
        return False

    async def lease_completing(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds,
        done: TableRefs,
    ) -> Leases | None:
        """None: a complete then a lease, apart (a local store has no round trips)."""
        return None


class Backend(Protocol):
    """One store of queues and items. Implementations live beside this file."""

    supports_notify: bool
    """True when :meth:`listen` delivers wakeups from other processes."""

    async def open(self) -> None:
        """Connect and create the schema, or migrate it to the newest version (idempotent)."""

    async def migrate(self, apply: bool) -> SchemaReport:
        """Create or migrate the schema to the newest version (or, unless ``apply``,
        report what that would do) without opening the backend for use."""

    async def close(self) -> None:
        """Release connections; the store keeps its data."""

    async def listen(self, on_wake: WakeCallback, on_ready: Callable[[], None]) -> None:
        """Deliver wakeups from other clients until cancelled.

        Runs as a background task of the service, started when a client first
        waits. ``on_ready()`` is called each time delivery starts (and after a
        reconnection): a wakeup sent before it may have been missed, so the
        service wakes every waiter to look again. Returns at once (or sleeps
        forever) when the store has no cross-process wakeups.
        """

    # -- queues -------------------------------------------------------------
    def sync_calls(self) -> SyncHotCalls | None:
        """The hot calls for sync callers on their own thread, or None (the
        backend has none, or is not open): the sync client then runs every
        call on its event loop thread."""
        ...

    async def complete_table(self, refs: TableRefs) -> bool:
        """Complete held items of one partition table in one statement; False when
        the store has no such call or a check failed (nothing changed): then
        :meth:`transact` must run the plan, and names the reasons."""
        ...

    async def lease_completing(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds,
        done: TableRefs,
    ) -> Leases | None:
        """Complete the held items ``done`` (of one partition table of
        ``queue``) and :meth:`lease` from ``partition`` in one round trip; None
        when the store has no such call or a check failed (nothing changed,
        nothing leased): then the caller completes apart, which names the
        reasons."""
        ...

    async def create_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Create the queue and its partition tables; QueueExists if taken."""

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Store new settings, creating added partitions; QueueNotFound if absent."""

    async def pause_queue(self, name: str, paused: bool) -> QueueInfo:
        """Mark the queue paused (or not) in the catalog and wake every client of
        the store with :func:`settings_wake`; QueueNotFound if absent."""

    async def delete_queue(self, name: str, force: bool) -> None:
        """Drop the queue and its tables; QueueNotFound if absent. Unless ``force``,
        a queue that holds items raises QueueNotEmpty and stays (checked in the
        transaction that would drop it, so no item produced meanwhile is lost)."""

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's info; QueueNotFound if absent."""

    async def list_queues(self, pivot: str | None, limit: int) -> list[QueueInfo]:
        """Queues with name >= pivot, by name, at most ``limit``."""

    async def queues_with_dead_queue(self, dead_queue: str) -> list[str]:
        """Names of queues whose settings name ``dead_queue``."""

    # -- items --------------------------------------------------------------
    async def produce(self, queue: QueueInfo, items: Sequence[NewItem]) -> list[str]:
        """Insert items; returns ids in order. A dedup_key already held returns that id."""

    def produce_steps(self, queue: QueueInfo, items: Sequence[NewItem]) -> ProduceSteps:
        """The statements that insert items on a connection the application owns,
        inside its open transaction (:mod:`querator.queue.foreign`);
        InvalidArgument (field ``connection``) where the store cannot do that."""

    async def lease(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds = None,
    ) -> Leases:
        """Lease up to ``limit`` leasable items of one partition, in order; with
        ``kinds``, only items whose ``kind`` is one of them (the others are not
        touched: they keep their place, attempts and version)."""

    async def next_available_at(self, queue: QueueInfo, kinds: Kinds = None) -> datetime | None:
        """Earliest ``available_at`` of any item that could become leasable, or None
        (with ``kinds``: of those items whose kind is one of them)."""

    async def transact(self, plan: TxnPlan) -> TransactResult:
        """Apply the plan atomically or raise Conflict listing every failed check."""

    async def dead_letter_due(self, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
        """Move up to ``limit`` exhausted or expired, unheld items; returns how many."""

    async def claim_maintenance(self, interval: float) -> bool:
        """True for exactly one caller per ``interval`` seconds across all clients."""

    async def stats(self, queue: QueueInfo) -> list[PartitionStats]:
        """Counts per partition."""

    async def gauges(self, queue: QueueInfo, limit: int) -> list[PartitionGauges]:
        """Cheap counts per partition for metrics: each probe reads at most
        ``limit`` rows through an index (or the table's first rows), and the
        oldest leasable item is the first row of the lease order. Counts past
        ``limit`` are the store's estimate (see :class:`PartitionGauges`)."""

    async def list_items(
        self,
        queue: QueueInfo,
        partition: int,
        pivot_seq: int | None,
        limit: int,
        scheduled_only: bool,
    ) -> list[StoredItem]:
        """Items of one partition with seq >= pivot_seq, by seq."""

    async def lookup(self, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
        """The items (in any partition) that hold any of ``dedup_keys``, in no order."""

    async def scan_keys(
        self, queue: QueueInfo, low: str, include_low: bool, high: str | None, limit: int
    ) -> list[StoredItem]:
        """Up to ``limit`` items (any partition) with ``low <(=) dedup_key < high``,
        by dedup key in code point order (``high`` None: no upper bound)."""

    async def delete_items(self, queue: QueueInfo, keys: Sequence[tuple[str, int, int]]) -> None:
        """Delete (id, partition, seq) items; Conflict (MISSING) lists absent ones."""

    async def clear(self, queue: QueueInfo, destructive: bool) -> int:
        """Delete unheld items (or all when destructive); returns how many."""
