"""Public value types of the lease queue: settings in, frozen records out.

All timestamps are timezone-aware UTC ``datetime``s; all durations are seconds
(``float``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, NamedTuple

from pydantic import Field, ValidationInfo, field_validator

from querator.errors import InvalidArgument
from querator.model_bases import InputModel, View
from querator.queue.validation import MAX_DURATION, NAME_PATTERN, check_priority

__all__ = [
    "DEFAULT_EXPIRE_TIMEOUT",
    "KEPT",
    "Item",
    "Leased",
    "PartitionGauges",
    "PartitionStats",
    "QueueGauges",
    "QueueInfo",
    "QueueSettings",
    "QueueStats",
    "Ref",
    "StoredItem",
    "TransactResult",
]

QueueName = Annotated[str, Field(pattern=NAME_PATTERN, min_length=1, max_length=512)]

NUL_MESSAGE = "must not contain the NUL character (U+0000): PostgreSQL text cannot hold it"
"""Why a text field with a NUL in it is an InvalidArgument on every backend."""


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise ValueError(NUL_MESSAGE)
    return value


Seconds = Annotated[float, Field(gt=0, le=MAX_DURATION, allow_inf_nan=False)]

DEFAULT_EXPIRE_TIMEOUT = 86_400.0 * 7
"""A queue's ``expire_timeout`` unless its settings set one (7 days)."""

KEPT = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
"""The ``expire_at`` of an item that never expires: a dead letter its dead queue
keeps until it is requeued or purged."""


class QueueSettings(InputModel):
    """How a queue treats its items. Defaults live here and nowhere else."""

    lease_timeout: Seconds = 60.0
    """Seconds a lease holds an item before it becomes leasable again."""
    expire_timeout: Seconds = DEFAULT_EXPIRE_TIMEOUT
    """Seconds an unfinished item lives, counted from the instant it becomes
    available (its ``enqueue_at``, or its production), before it is dead-lettered
    (>= lease_timeout); a scheduled item never expires while it waits. The dead
    letters a queue receives expire only when this is set to anything but the
    default (:attr:`dead_letter_expiry`): by default a dead queue keeps them."""
    max_attempts: int = Field(default=0, ge=0, le=65_536)
    """Leases an item may have before it is dead-lettered; 0 means unlimited."""
    dead_queue: QueueName | None = None
    """Queue that receives exhausted or expired items; None deletes them instead."""
    reference: str = Field(default="", max_length=2_000)
    """Free text for the operator (an owner, a link)."""
    partitions: int = Field(default=1, ge=1, le=1_024)
    """Number of partitions (tables); may only grow."""

    _reference_text = field_validator("reference")(_no_nul)

    @property
    def dead_letter_expiry(self) -> float | None:
        """Seconds a dead letter arriving in this queue is kept, or None (the
        default): kept until it is requeued or purged. A queue asks for an expiry
        of its dead letters by setting ``expire_timeout`` to anything but
        :data:`DEFAULT_EXPIRE_TIMEOUT` (the value, not how it was given, decides,
        so every backend and the HTTP API agree)."""
        expire = self.expire_timeout
        return None if expire == DEFAULT_EXPIRE_TIMEOUT else expire

    @field_validator("expire_timeout")
    @classmethod
    def _expire_covers_lease(cls, value: float, info: ValidationInfo) -> float:
        lease = info.data.get("lease_timeout")
        if lease is not None and value < lease:
            raise ValueError(f"must be >= lease_timeout ({lease}s), got {value}s")
        return value


class QueueInfo(View):
    """A queue as stored: its name, internal id and settings."""

    name: str
    """The user-given name."""
    queue_id: int
    """Internal numeric id; partition tables are named from it."""
    settings: QueueSettings
    """The queue's current settings."""
    created_at: datetime
    """When the queue was created."""
    paused: bool = False
    """Whether the queue is paused: its items are not leased (leases wait as if
    it were empty) until it is resumed; produce still adds items."""


class Item(InputModel):
    """An item to produce."""

    payload: bytes = b""
    """The opaque body of the item: bytes, or a str, stored as its UTF-8 encoding
    (read back as bytes). Anything else is an InvalidArgument: encode structured
    data yourself (``json.dumps(data).encode()``)."""
    kind: str = Field(default="", max_length=512)
    """What the payload is (an application-level type name)."""
    encoding: str = Field(default="", max_length=512)
    """How the payload is encoded (``json``, ``msgpack`` …)."""
    reference: str = Field(default="", max_length=2_000)
    """Free text for the application (an order number, a run id)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """String metadata; carries trace context."""
    enqueue_at: datetime | None = None
    """Deliver no earlier than this instant (scheduled delivery); None means now."""
    dedup_key: str | None = Field(default=None, min_length=1, max_length=512)
    """While an item holding this key is in the queue, producing the key again returns its id."""
    partition_key: str | None = Field(default=None, min_length=1, max_length=512)
    """Items with the same key land in the same partition and keep FIFO order."""
    priority: int = 0
    """Among items ready to lease, higher priorities are leased first; FIFO within
    one priority. An int from -32768 to 32767; 0 (the default) costs nothing."""

    _texts = field_validator("kind", "encoding", "reference", "dedup_key", "partition_key")(_no_nul)

    @field_validator("priority", mode="before")
    @classmethod
    def _priority_int(cls, value: object) -> int:
        try:
            return check_priority("priority", value)
        except InvalidArgument as exc:
            raise ValueError(exc.rule) from None

    @field_validator("payload", mode="before")
    @classmethod
    def _payload_bytes(cls, value: object) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, bytearray):
            return bytes(value)
        if isinstance(value, str):
            try:
                return value.encode()
            except UnicodeEncodeError as exc:
                raise ValueError(f"a str payload must encode as UTF-8: {exc.reason}") from None
        raise ValueError(
            f"must be bytes, or a str (stored as UTF-8), got {type(value).__name__};"
            " encode structured data yourself, e.g. json.dumps(data).encode()"
        )

    @field_validator("headers")
    @classmethod
    def _headers_text(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if "\x00" in key or "\x00" in text:
                raise ValueError(f"entry {key!r}: {NUL_MESSAGE}")
        return value


class StoredItem(View):
    """An item as the queue holds it."""

    id: str
    """Stable id for the item's whole life in this queue."""
    version: int
    """Bumped by every change; every change names it."""
    queue: str
    """The queue's name."""
    partition: int
    """Partition index, ``0 <= partition < partitions``."""
    available_at: datetime
    """When the item is (or becomes) leasable."""
    lease_deadline: datetime | None
    """Deadline of the latest lease, if any."""
    client_id: str | None
    """Client that holds (or last held) the lease."""
    attempts: int
    """Number of leases so far."""
    expire_at: datetime
    """When the item is dead-lettered if still unfinished."""
    payload: bytes
    """The opaque body."""
    kind: str
    """Application-level type name."""
    encoding: str
    """Payload encoding."""
    reference: str
    """Application free text."""
    headers: dict[str, str]
    """String metadata."""
    dedup_key: str | None
    """Deduplication key, if any."""
    source_id: str | None
    """Id the item had in its source queue, when it arrived by dead-lettering."""
    created_at: datetime
    """When the item was produced (into this queue)."""
    priority: int = 0
    """Its priority: among ready items, higher ones are leased first."""


class Leased(StoredItem):
    """An item under a lease held by the caller: pass it to complete/retry/renew."""

    lease_deadline: datetime
    """When this lease ends unless renewed."""
    client_id: str
    """The client that holds the lease."""


class Ref(NamedTuple):
    """A reference to an item version: what transact, complete, retry and renew check."""

    queue: str
    id: str
    version: int


class PartitionStats(View):
    """Counts for one partition at one instant."""

    partition: int
    total: int
    """Items in the partition."""
    leased: int
    """Items under a live lease."""
    scheduled: int
    """Items not leased and not yet due."""
    dead_lettered: int
    """Items that arrived here by dead-lettering (non-zero on dead queues)."""
    oldest_age: float | None
    """Seconds since the oldest item was produced; None when empty."""


class QueueStats(View):
    """Per-partition counts for a queue."""

    queue: str
    partitions: list[PartitionStats]

    @property
    def total(self) -> int:
        """Items in all partitions."""
        return sum(p.total for p in self.partitions)

    @property
    def leased(self) -> int:
        """Items under a live lease in all partitions."""
        return sum(p.leased for p in self.partitions)

    @property
    def scheduled(self) -> int:
        """Scheduled items in all partitions."""
        return sum(p.scheduled for p in self.partitions)

    @property
    def dead_lettered(self) -> int:
        """Dead-lettered arrivals in all partitions."""
        return sum(p.dead_lettered for p in self.partitions)


class PartitionGauges(View):
    """Cheap counts for one partition at one instant: every probe reads at most
    ``limit`` rows (an index range or the table's first rows), never the table."""

    partition: int
    depth: int
    """Items in the partition: counted when fewer than the limit, else the store's
    estimate (PostgreSQL: the planner's row estimate, scaled to the table's
    current size; SQLite: the span of item seqs, an upper bound; memory: exact)."""
    leased: int
    """Items under a live lease, counted among the first ``limit`` items not yet
    available (held or scheduled); a lower bound when that probe was full."""
    scheduled: int
    """Items not leased and not yet due, counted like ``leased``."""
    oldest_age: float | None
    """Seconds since the first leasable item became available (the head of the
    lease order); None when nothing is leasable."""
    exact: bool
    """True when no probe reached the limit: every count above is exact."""
    produced: int | None = None
    """Items ever produced into the partition (the seqs it handed out, a counter
    that completes and deletes never lower; dead-lettered arrivals included):
    sampled twice, it gives what went in between. None when the store does not
    say (a server older than this field)."""


class QueueGauges(View):
    """Per-partition gauges for a queue (see :class:`PartitionGauges`)."""

    queue: str
    partitions: list[PartitionGauges]

    @property
    def depth(self) -> int:
        """Items in all partitions (exact or estimated, see ``exact``)."""
        return sum(p.depth for p in self.partitions)

    @property
    def leased(self) -> int:
        """Items under a live lease in all partitions."""
        return sum(p.leased for p in self.partitions)

    @property
    def scheduled(self) -> int:
        """Scheduled items in all partitions."""
        return sum(p.scheduled for p in self.partitions)

    @property
    def oldest_age(self) -> float | None:
        """The longest any leasable item has waited, in seconds; None when none is."""
        ages = [p.oldest_age for p in self.partitions if p.oldest_age is not None]
        return max(ages, default=None)

    @property
    def exact(self) -> bool:
        """True when every partition's counts are exact."""
        return all(p.exact for p in self.partitions)

    @property
    def produced(self) -> int | None:
        """Items ever produced into the queue (see :attr:`PartitionGauges.produced`);
        None when a partition does not say."""
        counts = [p.produced for p in self.partitions]
        return None if None in counts else sum(c for c in counts if c is not None)


class TransactResult(View):
    """What a transaction produced and renewed."""

    produced: dict[str, list[str]]
    """New item ids per queue, in the order given."""
    renewed: list[Leased]
    """The renewed items with their new versions and deadlines."""
    leased: dict[str, list[Leased | None]] = Field(default_factory=dict)
    """Per queue of ``produce_leased``, in the order given: each item leased to the
    caller, or None where it was not leasable at once (scheduled later, or its
    dedup key held by an item another client holds)."""
    found: dict[str, dict[str, StoredItem]] = Field(default_factory=dict)
    """Per queue of ``lookup``: the items holding those dedup keys once the
    transaction was applied, by key (keys held by no item are absent)."""
    held_for: dict[str, list[float]] = Field(default_factory=dict)
    """Per queue, how long the items this transaction completed had been leased
    (seconds on the store's clock, from the start of the lease to this
    completion), whoever leased them: the lease-to-complete latency. A queue is
    absent where the store did not measure it (then the client measures the
    items it leased itself)."""
