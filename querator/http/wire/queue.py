"""Bodies of the ``/v1/queue.*`` endpoints (Querator's shapes, plus renew and
transact, which Querator does not have)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator

from querator.http.wire.items import ItemRef, LeaseItem, ProduceItem, QueueItemRef, StorageItem
from querator.http.wire.types import Duration, Instant, QueueName, RequestTimeout, WireModel
from querator.queue.models import PartitionGauges as LibraryPartitionGauges
from querator.queue.models import PartitionStats as LibraryPartitionStats
from querator.queue.models import QueueGauges, QueueStats
from querator.queue.validation import MAX_BATCH


class Reply(WireModel):
    """DUH-RPC's reply: the body of every error and of calls that return nothing."""

    code: int = 200
    """The HTTP status, repeated."""
    code_text: str = "OK"
    """The status in words (``Bad Request``, ``Retry Request``, ...)."""
    message: str = ""
    """What went wrong: ``"<constant part>; <details>"``."""
    details: dict[str, str] = Field(default_factory=dict)
    """Machine-readable specifics (querator: ``type``, ``field``, ``rule``, per-id reasons)."""


def _batch(label: str, size: int) -> None:
    if size == 0:
        raise ValueError(f"{label} is invalid; list of {label} cannot be empty")
    if size > MAX_BATCH:
        raise ValueError(f"{label} is invalid; max batch size is {MAX_BATCH} but received {size}")


class ProduceRequest(WireModel):
    """``/v1/queue.produce``."""

    queue_name: QueueName
    request_timeout: RequestTimeout = Field(default=0.0, validate_default=True)
    items: list[ProduceItem] = Field(default_factory=list, validate_default=True)

    @field_validator("items")
    @classmethod
    def _some(cls, items: list[ProduceItem]) -> list[ProduceItem]:
        if not items:
            raise ValueError("items cannot be empty; at least one item is required")
        if len(items) > MAX_BATCH:
            raise ValueError(
                f"items is invalid; max_produce_batch_size is {MAX_BATCH} but received {len(items)}"
            )
        return items


class ProduceReply(Reply):
    """The reply to produce, with the new items' ids (querator)."""

    ids: list[str] = Field(default_factory=list)


class LeaseRequest(WireModel):
    """``/v1/queue.lease``: waits up to ``request_timeout`` for an item."""

    queue_name: QueueName
    batch_size: int = Field(default=0, validate_default=True)
    client_id: str = Field(default="", validate_default=True)
    request_timeout: RequestTimeout = Field(default=0.0, validate_default=True)
    kinds: list[str] | None = None
    """querator's extension: lease only items of these kinds (field 100)."""
    complete: list[ItemRef] = Field(default_factory=list)
    """querator's extension: leased items with versions to complete first, all
    or nothing, before the lease looks (field 101)."""

    @field_validator("client_id")
    @classmethod
    def _client(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("invalid client id; cannot be empty")
        return value

    @field_validator("batch_size")
    @classmethod
    def _size(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("invalid batch size; must be greater than zero")
        if value > MAX_BATCH:
            raise ValueError(
                f"invalid batch size; max_lease_batch_size is {MAX_BATCH}, "
                f"but {value} was requested"
            )
        return value


class LeaseReply(WireModel):
    """The items leased."""

    queue_name: str
    partition: int
    """The partition of the first item (each item names its own)."""
    items: list[LeaseItem]


class CompleteRequest(WireModel):
    """``/v1/queue.complete``: ``ids`` (Querator) and/or ``items`` with versions."""

    queue_name: QueueName
    partition: int = 0
    """Ignored: an id names its partition."""
    request_timeout: RequestTimeout = Field(default=0.0, validate_default=True)
    ids: list[str] = Field(default_factory=list)
    """Item ids: each is completed at its current version, if leased (as Querator)."""
    items: list[ItemRef] = Field(default_factory=list)
    """Item ids with the version leased: a stale version is refused (querator)."""

    def size(self) -> None:
        """Querator's checks of the number of items."""
        _batch("ids", len(self.ids) + len(self.items))


class RetryItem(ItemRef):
    """One item to retry."""

    retry_at: Instant | None = None
    """Leasable again at this instant (default now)."""
    dead: bool = False
    """Move it to the dead queue now."""
    reason: str | None = None
    """Why, should this dead-letter the item: kept with the dead letter (querator)."""


class RetryRequest(WireModel):
    """``/v1/queue.retry``: every item must share ``retry_at``, ``dead`` and ``reason``."""

    queue_name: QueueName
    partition: int = 0
    """Ignored: an id names its partition."""
    items: list[RetryItem] = Field(default_factory=list, validate_default=True)

    @field_validator("items")
    @classmethod
    def _some(cls, items: list[RetryItem]) -> list[RetryItem]:
        _batch("items", len(items))
        if len({(item.retry_at, item.dead, item.reason) for item in items}) > 1:
            raise ValueError(
                "items is invalid; every item of one retry must share retry_at, dead and reason"
            )
        return items


class RenewRequest(WireModel):
    """``/v1/queue.renew`` (querator): extend held leases."""

    queue_name: QueueName
    items: list[ItemRef] = Field(default_factory=list, validate_default=True)
    extend: Duration | None = None
    """New lease length from now (default: the queue's lease_timeout)."""

    @field_validator("items")
    @classmethod
    def _some(cls, items: list[ItemRef]) -> list[ItemRef]:
        _batch("items", len(items))
        return items


class RenewReply(WireModel):
    """The renewed items, with their new versions and deadlines."""

    items: list[LeaseItem]


class TransactRequest(WireModel):
    """``/v1/queue.transact`` (querator): all of it or none of it."""

    complete: list[QueueItemRef] = Field(default_factory=list)
    retry: list[QueueItemRef] = Field(default_factory=list)
    renew: list[QueueItemRef] = Field(default_factory=list)
    depends: list[QueueItemRef] = Field(default_factory=list)
    """Pure version checks."""
    delete: list[QueueItemRef] = Field(default_factory=list)
    """Items to delete, at these versions, that no live lease holds."""
    produce: dict[str, list[ProduceItem]] = Field(default_factory=dict)
    """Items to produce, per queue."""
    retry_at: Instant | None = None
    extend: Duration | None = None
    produce_leased: dict[str, list[ProduceItem]] = Field(default_factory=dict)
    """Items to produce and lease at once to ``client_id``, per queue."""
    client_id: str | None = None
    lookup: dict[str, list[str]] = Field(default_factory=dict)
    """Dedup keys to look up once applied, per queue."""
    silent: list[str] = Field(default_factory=list)
    """Queues whose waiting consumers are not woken."""


class TransactReply(WireModel):
    """What the transaction produced, renewed, leased and found."""

    produced: dict[str, list[str]]
    renewed: list[LeaseItem]
    leased: dict[str, list[LeaseItem | None]]
    found: dict[str, dict[str, StorageItem]]


class Empty(WireModel):
    """A call that takes no arguments."""


class QueueRequest(WireModel):
    """A call naming one queue: ``/v1/queue.stats``, ``/v1/queues.info``."""

    queue_name: QueueName


class PartitionStats(WireModel):
    """Counts of one partition (Querator's names, plus querator's)."""

    partition: int
    total: int
    total_leased: int
    scheduled: int
    failures: int = 0
    """Always 0: attempts are per item here."""
    average_age: str = ""
    """Querator's; not computed here (see ``oldest_age``)."""
    average_leased_age: str = ""
    """Querator's; not computed here."""
    dead_lettered: int
    """Items that arrived by dead-lettering (querator)."""
    oldest_age: Duration | None
    """Age of the oldest item (querator)."""


class LogicalStats(WireModel):
    """Querator's per-logical-queue counters; querator has one logical queue."""

    produce_waiting: int = 0
    lease_waiting: int = 0
    complete_waiting: int = 0
    in_flight: int = 0
    partitions: list[PartitionStats]


class StatsReply(WireModel):
    """``/v1/queue.stats``."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    queue_name: str
    logical_queues: list[LogicalStats] = Field(alias="logicalQueues")
    """Written ``logicalQueues``, as Querator's definition names it (no json_name)."""

    @classmethod
    def of(cls, stats: QueueStats) -> StatsReply:
        """The library's counts in Querator's shape."""
        partitions = [
            PartitionStats(
                partition=p.partition,
                total=p.total,
                total_leased=p.leased,
                scheduled=p.scheduled,
                dead_lettered=p.dead_lettered,
                oldest_age=p.oldest_age,
            )
            for p in stats.partitions
        ]
        return cls(queue_name=stats.queue, logicalQueues=[LogicalStats(partitions=partitions)])

    def to_stats(self) -> QueueStats:
        """Back to the library's counts (every logical queue's partitions)."""
        partitions = [
            LibraryPartitionStats(
                partition=p.partition,
                total=p.total,
                leased=p.total_leased,
                scheduled=p.scheduled,
                dead_lettered=p.dead_lettered,
                oldest_age=p.oldest_age,
            )
            for logical in self.logical_queues
            for p in logical.partitions
        ]
        return QueueStats(queue=self.queue_name, partitions=partitions)


class GaugesRequest(WireModel):
    """``/v1/queue.gauges``: cheap counts for metrics."""

    queue_name: QueueName
    limit: int = Field(default=10_000, ge=1, le=1_000_000)
    """Rows a probe of one partition reads at most; counts are exact below it."""


class PartitionGauges(WireModel):
    """The bounded counts of one partition (see the library's ``PartitionGauges``)."""

    partition: int
    depth: int
    leased: int
    scheduled: int
    oldest_age: Duration | None
    exact: bool
    produced: int | None = None
    """Items ever produced into the partition (None from an older server)."""


class GaugesReply(WireModel):
    """``/v1/queue.gauges``."""

    queue_name: str
    partitions: list[PartitionGauges]

    @classmethod
    def of(cls, gauges: QueueGauges) -> GaugesReply:
        """The library's gauges on the wire."""
        return cls(
            queue_name=gauges.queue,
            partitions=[PartitionGauges(**p.model_dump()) for p in gauges.partitions],
        )

    def to_gauges(self) -> QueueGauges:
        """Back to the library's gauges."""
        return QueueGauges(
            queue=self.queue_name,
            partitions=[
                LibraryPartitionGauges(
                    partition=p.partition,
                    depth=p.depth,
                    leased=p.leased,
                    scheduled=p.scheduled,
                    oldest_age=p.oldest_age,
                    exact=p.exact,
                    produced=p.produced,
                )
                for p in self.partitions
            ],
        )


class ClearRequest(WireModel):
    """``/v1/queue.clear``: deletes every item not under a live lease."""

    queue_name: QueueName
    queue: bool = False
    """Clear the queue's items (set this or ``scheduled``)."""
    scheduled: bool = False
    """Clear scheduled items (cleared together with the rest)."""
    destructive: bool = False
    """Also delete leased items."""

    def check(self) -> None:
        """Querator refuses a clear that names nothing."""
        if not (self.queue or self.scheduled or self.destructive):
            raise ValueError(
                "invalid clear request; one of 'queue', 'scheduled' or 'destructive' must be true"
            )


class ClearReply(Reply):
    """The reply to clear, with the count deleted (querator)."""

    deleted: int = 0


class LookupRequest(WireModel):
    """``/v1/queue.lookup`` (querator): items holding dedup keys."""

    queue_name: QueueName
    dedup_keys: list[str]


class LookupReply(WireModel):
    """Items by dedup key (keys held by none are absent)."""

    items: dict[str, StorageItem]


class ScanKeysRequest(WireModel):
    """``/v1/queue.scan_keys`` (querator): items whose dedup key starts with a prefix."""

    queue_name: QueueName
    prefix: str = ""
    after: str | None = None
    """The last key of the previous page."""
    limit: int = 100


class ScanKeysReply(WireModel):
    """Items in dedup-key order."""

    items: list[StorageItem]
