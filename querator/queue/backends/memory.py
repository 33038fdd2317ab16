"""The in-memory backend: ephemeral, one process, same semantics as the others.

It is a real backend held to the conformance suite, not a fake. Each partition
keeps its rows by ``seq`` plus a heap of ``(available_at, seq)`` entries with
lazy deletion, so leasing stays O(log n) per item.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio

from querator.clock import SYSTEM, Clock
from querator.errors import (
    Conflict,
    ConflictReason,
    InvalidArgument,
    QueueExists,
    QueueNotEmpty,
    QueueNotFound,
)
from querator.queue.backends.base import (
    ItemKey,
    Kinds,
    Leases,
    LocalCalls,
    NewItem,
    ProduceSteps,
    RetryOp,
    TxnPlan,
    WakeCallback,
    refuse_foreign,
)
from querator.queue.backends.schema_versions import SchemaReport
from querator.queue.dead_reasons import marked, retry_reason, sweep_reason
from querator.queue.ids import format_id, parse_id
from querator.queue.models import (
    KEPT,
    Leased,
    PartitionGauges,
    PartitionStats,
    QueueInfo,
    QueueSettings,
    StoredItem,
    TransactResult,
)

_KEPT = KEPT.timestamp()
"""The ``expire_at`` of an item that never expires."""


def _ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(slots=True)
class _Row:
    seq: int
    version: int
    available_at: float
    lease_deadline: float | None
    client_id: str | None
    attempts: int
    expire_at: float
    payload: bytes
    kind: str
    encoding: str
    reference: str
    headers: dict[str, str]
    dedup_key: str | None
    source_id: str | None
    created_at: float
    priority: int = 0
    leased_at: float | None = None

    def held(self, now: float) -> bool:
        return self.lease_deadline is not None and self.lease_deadline > now


@dataclass(slots=True)
class _Partition:
    rows: dict[int, _Row] = field(default_factory=dict)
    heap: list[tuple[float, int]] = field(default_factory=list)
    dedup: dict[str, int] = field(default_factory=dict)
    seqs: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    prioritized: int = 0
    """Rows whose priority is not 0 (while none, a lease follows the heap alone)."""

    def push(self, row: _Row) -> None:
        heapq.heappush(self.heap, (row.available_at, row.seq))

    def remove(self, seq: int) -> _Row:
        row = self.rows.pop(seq)
        if row.priority:
            self.prioritized -= 1
        if row.dedup_key is not None:
            self.dedup.pop(row.dedup_key, None)
        return row

    def valid_top(self) -> tuple[float, int] | None:
        """The heap's first entry that still describes its row."""
        while self.heap:
            at, seq = self.heap[0]
            row = self.rows.get(seq)
            if row is not None and row.available_at == at:
                return at, seq
            heapq.heappop(self.heap)
        return None


def _leasable(row: _Row, settings: QueueSettings, now: float) -> bool:
    exhausted = 0 < settings.max_attempts <= row.attempts
    return row.available_at <= now and not exhausted and row.expire_at > now


class MemoryBackend(LocalCalls):
    """A store that lives in this process's memory and vanishes with it."""

    supports_notify = True
    """No other process can write to this store, so local wakeups are complete."""

    def __init__(self, clock: Clock = SYSTEM) -> None:
        self._clock = clock
        self._queues: dict[str, QueueInfo] = {}
        self._parts: dict[int, list[_Partition]] = {}
        self._ids = itertools.count(1)
        self._last_maintenance = 0.0

    def _time(self) -> float:
        """The clock's instant as seconds since the epoch (the host's by default)."""
        given = self._clock.store_now()
        return time.time() if given is None else given.timestamp()

    async def open(self) -> None:
        """Nothing to connect to."""

    async def migrate(self, apply: bool) -> SchemaReport:
        """Nothing to migrate: a memory store lives as long as its process."""
        return SchemaReport("memory store", 0, 0, (), apply)

    async def close(self) -> None:
        """Nothing to release; data stays until the object is dropped."""

    async def listen(self, on_wake: WakeCallback, on_ready: Callable[[], None]) -> None:
        """No other processes share this store: wait until cancelled."""
        on_ready()
        await anyio.sleep_forever()

    # -- queues -------------------------------------------------------------
    async def create_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Create the queue; QueueExists if taken."""
        if name in self._queues:
            raise QueueExists(name)
        info = QueueInfo(
            name=name, queue_id=next(self._ids), settings=settings, created_at=_ts(self._time())
        )
        self._queues[name] = info
        self._parts[info.queue_id] = [_Partition() for _ in range(settings.partitions)]
        return info

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Store new settings and add partitions."""
        info = await self.get_queue(name)
        parts = self._parts[info.queue_id]
        if settings.partitions < len(parts):
            raise InvalidArgument("partitions", f"may only grow (now {len(parts)})")
        parts.extend(_Partition() for _ in range(settings.partitions - len(parts)))
        info = info.model_copy(update={"settings": settings})
        self._queues[name] = info
        return info

    async def pause_queue(self, name: str, paused: bool) -> QueueInfo:
        """Mark the queue paused (or not); this process is the store's only client."""
        info = (await self.get_queue(name)).model_copy(update={"paused": paused})
        self._queues[name] = info
        return info

    async def delete_queue(self, name: str, force: bool) -> None:
        """Drop the queue and its items (refused while it holds any, unless ``force``)."""
        info = await self.get_queue(name)
        count = sum(len(part.rows) for part in self._parts[info.queue_id])
        if count and not force:
            raise QueueNotEmpty(name, count)
        del self._queues[name]
        del self._parts[info.queue_id]

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's info; QueueNotFound if absent."""
        try:
            return self._queues[name]
        except KeyError:
            raise QueueNotFound(name) from None

    async def list_queues(self, pivot: str | None, limit: int) -> list[QueueInfo]:
        """Queues with name >= pivot, by name."""
        names = sorted(n for n in self._queues if pivot is None or n >= pivot)
        return [self._queues[n] for n in names[:limit]]

    async def queues_with_dead_queue(self, dead_queue: str) -> list[str]:
        """Names of queues that dead-letter into ``dead_queue``."""
        return sorted(n for n, i in self._queues.items() if i.settings.dead_queue == dead_queue)

    def _partitions(self, queue: QueueInfo) -> list[_Partition]:
        current = self._queues.get(queue.name)
        if current is None or current.queue_id != queue.queue_id:
            raise QueueNotFound(queue.name)
        return self._parts[queue.queue_id]

    # -- items --------------------------------------------------------------
    def produce_steps(self, queue: QueueInfo, items: Sequence[NewItem]) -> ProduceSteps:
        """Refused: an in-memory store has no connection an application could share."""
        raise refuse_foreign("an in-memory store")

    async def produce(self, queue: QueueInfo, items: Sequence[NewItem]) -> list[str]:
        """Insert items; a held dedup_key returns the existing id."""
        parts = self._partitions(queue)
        return self._insert(queue, parts, items, self._time())

    def _insert(
        self, queue: QueueInfo, parts: list[_Partition], items: Sequence[NewItem], now: float
    ) -> list[str]:
        ids = []
        for new in items:
            part = parts[new.partition]
            if new.dedup_key is not None and new.dedup_key in part.dedup:
                ids.append(format_id(queue.queue_id, new.partition, part.dedup[new.dedup_key]))
                continue
            available = new.available_at.timestamp() if new.available_at else now
            row = _Row(
                seq=next(part.seqs),
                version=1,
                available_at=available,
                lease_deadline=None,
                client_id=None,
                attempts=0,
                expire_at=max(available, now) + queue.settings.expire_timeout,
                payload=new.payload,
                kind=new.kind,
                encoding=new.encoding,
                reference=new.reference,
                headers=dict(new.headers),
                dedup_key=new.dedup_key,
                source_id=None,
                created_at=now,
                priority=new.priority,
            )
            self._add(part, row)
            ids.append(format_id(queue.queue_id, new.partition, row.seq))
        return ids

    @staticmethod
    def _add(part: _Partition, row: _Row) -> None:
        part.rows[row.seq] = row
        if row.priority:
            part.prioritized += 1
        if row.dedup_key is not None:
            part.dedup[row.dedup_key] = row.seq
        part.push(row)

    async def lease(
        self, queue: QueueInfo, partition: int, client_id: str, limit: int, kinds: Kinds = None
    ) -> Leases:
        """Lease up to ``limit`` items of one partition in (available_at, seq) order
        (with ``kinds``: of those kinds only), higher priorities first."""
        part = self._partitions(queue)[partition]
        now = self._time()
        deadline = now + queue.settings.lease_timeout
        leased = Leases([], [])
        skipped: list[tuple[float, int]] = []
        # With priorities, every ready item is looked at (this store is for tests).
        wanted = limit if not part.prioritized else len(part.rows)
        while (
            len(leased.items) < wanted and (top := part.valid_top()) is not None and top[0] <= now
        ):
            heapq.heappop(part.heap)
            row = part.rows[top[1]]
            if not _leasable(row, queue.settings, now) or (
                kinds is not None and row.kind not in kinds
            ):
                skipped.append(top)
                continue
            if part.prioritized:
                skipped.append(top)
                continue
            leased.waited.append(now - row.available_at)
            leased.items.append(self._lease_row(queue, partition, part, row, client_id, deadline))
        if part.prioritized:
            ready = [part.rows[seq] for _, seq in skipped]
            skipped = []
            for row in sorted(ready, key=lambda r: (-r.priority, r.available_at, r.seq)):
                if (
                    len(leased.items) >= limit
                    or not _leasable(row, queue.settings, now)
                    or (kinds is not None and row.kind not in kinds)
                ):
                    skipped.append((row.available_at, row.seq))
                    continue
                leased.waited.append(now - row.available_at)
                leased.items.append(
                    self._lease_row(queue, partition, part, row, client_id, deadline)
                )
        for entry in skipped:
            heapq.heappush(part.heap, entry)
        return leased

    def _lease_row(
        self,
        queue: QueueInfo,
        partition: int,
        part: _Partition,
        row: _Row,
        client_id: str,
        deadline: float,
    ) -> Leased:
        row.available_at = row.lease_deadline = deadline
        row.leased_at = deadline - queue.settings.lease_timeout
        row.client_id = client_id
        row.attempts += 1
        row.version += 1
        part.push(row)
        return Leased.model_construct(**self._fields(queue, partition, row))

    def _claim(
        self, queue: QueueInfo, ids: list[str], client_id: str, now: float
    ) -> list[Leased | None]:
        """Lease the just-produced ``ids`` that are leasable now; None for the others."""
        parts = self._partitions(queue)
        deadline = now + queue.settings.lease_timeout
        found: dict[str, Leased] = {}
        for item_id in dict.fromkeys(ids):
            address = parse_id(item_id)
            assert address is not None
            part = parts[address.partition]
            row = part.rows[address.seq]
            if _leasable(row, queue.settings, now):
                found[item_id] = self._lease_row(
                    queue, address.partition, part, row, client_id, deadline
                )
        return [found.get(item_id) for item_id in ids]

    async def next_available_at(self, queue: QueueInfo, kinds: Kinds = None) -> datetime | None:
        """Earliest available_at among items that can still be leased (of ``kinds``)."""
        now = self._time()
        best: float | None = None
        for part in self._partitions(queue):
            for row in part.rows.values():
                exhausted = 0 < queue.settings.max_attempts <= row.attempts
                if exhausted or row.expire_at <= now:
                    continue
                if kinds is not None and row.kind not in kinds:
                    continue
                if best is None or row.available_at < best:
                    best = row.available_at
        return None if best is None else _ts(best)

    # -- transactions -------------------------------------------------------
    async def transact(self, plan: TxnPlan) -> TransactResult:
        """Check every key, then apply everything; nothing on any failure."""
        now = self._time()
        self._check(plan, now)
        held_for: dict[str, list[float]] = {}
        for key in plan.complete:
            row = self._part(plan, key).remove(key.seq)
            if row.leased_at is not None:
                held_for.setdefault(key.queue, []).append(now - row.leased_at)
        for key in plan.delete:
            self._part(plan, key).remove(key.seq)
        for op in plan.retry:
            self._retry(plan, op, now)
        renewed = []
        for renew in plan.renew:
            part = self._part(plan, renew.key)
            row = part.rows[renew.key.seq]
            row.available_at = row.lease_deadline = now + renew.extend
            row.version += 1
            part.push(row)
            info = plan.queues[renew.key.queue]
            renewed.append(Leased.model_construct(**self._fields(info, renew.key.partition, row)))
        produced: dict[str, list[str]] = {}
        for name, items in plan.produce:
            info = plan.queues[name]
            ids = self._insert(info, self._partitions(info), items, now)
            produced.setdefault(name, []).extend(ids)
        leased: dict[str, list[Leased | None]] = {}
        for name, items in plan.claim:
            info = plan.queues[name]
            assert plan.client_id is not None
            ids = self._insert(info, self._partitions(info), items, now)
            leased.setdefault(name, []).extend(self._claim(info, ids, plan.client_id, now))
        return TransactResult.model_construct(
            produced=produced, renewed=renewed, leased=leased, found={}, held_for=held_for
        )

    def _part(self, plan: TxnPlan, key: ItemKey) -> _Partition:
        return self._partitions(plan.queues[key.queue])[key.partition]

    def _check(self, plan: TxnPlan, now: float) -> None:
        for name, _ in [*plan.produce, *plan.claim]:
            self._partitions(plan.queues[name])
        held_keys = [*plan.complete, *(r.key for r in plan.retry), *(r.key for r in plan.renew)]
        reasons: dict[str, ConflictReason] = {}
        checks = [*((k, True) for k in held_keys), *((k, False) for k in plan.depends)]
        for key, need_lease in checks:
            reason = self._check_key(plan, key, need_lease, now)
            if reason is not None:
                reasons[key.id] = reason
        for key in plan.delete:
            reason = self._check_key(plan, key, False, now)
            if reason is None and self._part(plan, key).rows[key.seq].held(now):
                reason = ConflictReason.LEASED
            if reason is not None:
                reasons[key.id] = reason
        if reasons:
            raise Conflict(reasons)

    def _check_key(
        self, plan: TxnPlan, key: ItemKey, need_lease: bool, now: float
    ) -> ConflictReason | None:
        info = plan.queues[key.queue]
        current = self._queues.get(key.queue)
        parts = self._parts.get(info.queue_id, [])
        if current is None or current.queue_id != key.queue_id or key.partition >= len(parts):
            return ConflictReason.MISSING
        row = parts[key.partition].rows.get(key.seq)
        if row is None:
            return ConflictReason.MISSING
        if row.version != key.version:
            return ConflictReason.STALE
        if need_lease and not row.held(now):
            return ConflictReason.NOT_LEASED
        return None

    def _retry(self, plan: TxnPlan, op: RetryOp, now: float) -> None:
        key = op.key
        info = plan.queues[key.queue]
        part = self._part(plan, key)
        row = part.rows[key.seq]
        limit = info.settings.max_attempts
        if op.dead or 0 < limit <= row.attempts:
            dead_info = plan.queues.get(info.settings.dead_queue or "")
            why = retry_reason(op.reason, op.dead, limit)
            self._dead_letter(info, key.partition, part, row, (dead_info, why), now)
            return
        row.version += 1
        row.lease_deadline = None
        row.client_id = None
        row.available_at = op.retry_at.timestamp() if op.retry_at else now
        part.push(row)

    def _dead_letter(
        self,
        info: QueueInfo,
        partition: int,
        part: _Partition,
        row: _Row,
        to: tuple[QueueInfo | None, str],
        now: float,
    ) -> None:
        """Move ``row`` into the dead queue ``to[0]`` (delete it when None), why: ``to[1]``."""
        dead, why = to
        part.remove(row.seq)
        if dead is None:
            return
        dead_parts = self._partitions(dead)
        keep = dead.settings.dead_letter_expiry
        target = dead_parts[partition % len(dead_parts)]
        moved = replace(
            row,
            seq=next(target.seqs),
            version=1,
            available_at=now,
            lease_deadline=None,
            client_id=None,
            attempts=0,
            expire_at=_KEPT if keep is None else now + keep,
            headers=marked(row.headers, row.attempts, why, info.name),
            dedup_key=None,
            leased_at=None,
            source_id=format_id(info.queue_id, partition, row.seq),
            created_at=now,
        )
        self._add(target, moved)

    # -- maintenance and inspection ------------------------------------------
    async def dead_letter_due(self, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
        """Move exhausted or expired unheld items to the dead queue."""
        now = self._time()
        moved = 0
        max_attempts = queue.settings.max_attempts
        for index, part in enumerate(self._partitions(queue)):
            for row in list(part.rows.values()):
                if moved >= limit:
                    return moved
                exhausted = 0 < max_attempts <= row.attempts
                if row.available_at <= now and (exhausted or row.expire_at <= now):
                    why = sweep_reason(row.attempts, max_attempts)
                    self._dead_letter(queue, index, part, row, (dead, why), now)
                    moved += 1
        return moved

    async def claim_maintenance(self, interval: float) -> bool:
        """True at most once per ``interval`` seconds."""
        now = self._time()
        if now - self._last_maintenance < interval:
            return False
        self._last_maintenance = now
        return True

    async def stats(self, queue: QueueInfo) -> list[PartitionStats]:
        """Counts per partition."""
        now = self._time()
        out = []
        for index, part in enumerate(self._partitions(queue)):
            rows = part.rows.values()
            oldest = min((r.created_at for r in rows), default=None)
            out.append(
                PartitionStats(
                    partition=index,
                    total=len(rows),
                    leased=sum(r.held(now) for r in rows),
                    scheduled=sum(r.available_at > now and r.lease_deadline is None for r in rows),
                    dead_lettered=sum(r.source_id is not None for r in rows),
                    oldest_age=None if oldest is None else max(0.0, now - oldest),
                )
            )
        return out

    async def gauges(self, queue: QueueInfo, limit: int) -> list[PartitionGauges]:
        """Counts per partition, probed like the SQL stores' (leased and scheduled
        among the first ``limit`` items not yet available); the depth is exact."""
        now = self._time()
        out = []
        for index, part in enumerate(self._partitions(queue)):
            rows = part.rows.values()
            heads = [r.available_at for r in rows if _leasable(r, queue.settings, now)]
            waiting = sorted(
                (r for r in rows if r.available_at > now), key=lambda r: r.available_at
            )
            held = sum(r.lease_deadline is not None for r in waiting[:limit])
            out.append(
                PartitionGauges(
                    partition=index,
                    depth=len(rows),
                    leased=held,
                    scheduled=min(len(waiting), limit) - held,
                    oldest_age=max(0.0, now - min(heads)) if heads else None,
                    exact=len(rows) < limit and len(waiting) < limit,
                )
            )
        return out

    async def list_items(
        self,
        queue: QueueInfo,
        partition: int,
        pivot_seq: int | None,
        limit: int,
        scheduled_only: bool,
    ) -> list[StoredItem]:
        """Items of one partition with seq >= pivot_seq, by seq."""
        now = self._time()
        part = self._partitions(queue)[partition]
        out: list[StoredItem] = []
        for seq in sorted(part.rows):
            row = part.rows[seq]
            if pivot_seq is not None and seq < pivot_seq:
                continue
            if scheduled_only and not (row.available_at > now and row.lease_deadline is None):
                continue
            out.append(StoredItem.model_construct(**self._fields(queue, partition, row)))
            if len(out) >= limit:
                break
        return out

    async def lookup(self, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
        """The items holding any of ``dedup_keys``."""
        found = []
        for index, part in enumerate(self._partitions(queue)):
            for key in dedup_keys:
                seq = part.dedup.get(key)
                if seq is not None:
                    fields = self._fields(queue, index, part.rows[seq])
                    found.append(StoredItem.model_construct(**fields))
        return found

    async def scan_keys(
        self, queue: QueueInfo, low: str, include_low: bool, high: str | None, limit: int
    ) -> list[StoredItem]:
        """Items by dedup key in the range (sorts the keys: this store is for tests)."""
        found: list[tuple[str, int, int]] = []
        for index, part in enumerate(self._partitions(queue)):
            for key, seq in part.dedup.items():
                if (key > low or (include_low and key == low)) and (high is None or key < high):
                    found.append((key, index, seq))
        parts = self._partitions(queue)
        return [
            StoredItem.model_construct(**self._fields(queue, index, parts[index].rows[seq]))
            for _, index, seq in sorted(found)[:limit]
        ]

    async def delete_items(self, queue: QueueInfo, keys: Sequence[tuple[str, int, int]]) -> None:
        """Delete the items, or none of them if any is missing."""
        parts = self._partitions(queue)
        missing = {
            item_id: ConflictReason.MISSING
            for item_id, partition, seq in keys
            if partition >= len(parts) or seq not in parts[partition].rows
        }
        if missing:
            raise Conflict(missing)
        for _, partition, seq in keys:
            parts[partition].remove(seq)

    async def clear(self, queue: QueueInfo, destructive: bool) -> int:
        """Delete unheld items, or every item when destructive."""
        now = self._time()
        count = 0
        for part in self._partitions(queue):
            for row in list(part.rows.values()):
                if destructive or not row.held(now):
                    part.remove(row.seq)
                    count += 1
        return count

    @staticmethod
    def _fields(queue: QueueInfo, partition: int, row: _Row) -> dict[str, Any]:
        return {
            "id": format_id(queue.queue_id, partition, row.seq),
            "version": row.version,
            "queue": queue.name,
            "partition": partition,
            "available_at": _ts(row.available_at),
            "lease_deadline": None if row.lease_deadline is None else _ts(row.lease_deadline),
            "client_id": row.client_id,
            "attempts": row.attempts,
            "expire_at": _ts(row.expire_at),
            "payload": row.payload,
            "kind": row.kind,
            "encoding": row.encoding,
            "reference": row.reference,
            "headers": dict(row.headers),
            "dedup_key": row.dedup_key,
            "source_id": row.source_id,
            "created_at": _ts(row.created_at),
            "priority": row.priority,
        }
