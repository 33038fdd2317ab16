"""Items on the wire: what produce sends, what lease and the storage
endpoints return, and references to item versions.

Querator's fields keep their names (``bytes``/``utf8`` on produce, ``bytes`` on
a leased item, ``payload`` on a stored item, ``expire_deadline``); querator's
own fields (``version``, ``headers``, ``dedup_key``, ...) are added beside them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import Field, StrictInt

from querator.http.wire.types import Base64, Instant, QueueName, WireModel
from querator.queue.models import Item, StoredItem


class ProduceItem(WireModel):
    """One item of ``/v1/queue.produce``."""

    encoding: str = ""
    """How the payload is encoded (``json``, ...)."""
    kind: str = ""
    """What the payload is."""
    reference: str = ""
    """Free text for the application."""
    enqueue_at: Instant | None = None
    """Deliver no earlier than this instant."""
    bytes: Base64 | None = None
    """The payload, base64; when absent, ``utf8`` is the payload."""
    utf8: str | None = None
    """The payload as text (used when ``bytes`` is absent)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """String metadata (querator)."""
    dedup_key: str | None = None
    """Deduplication key (querator)."""
    partition_key: str | None = None
    """Items with the same key keep their order in one partition (querator)."""
    priority: StrictInt = 0
    """Among ready items, higher priorities are leased first, -32768 to 32767 (querator)."""

    def to_item(self) -> Item:
        """The library's Item (raises InvalidArgument on a bad field)."""
        payload = self.bytes if self.bytes is not None else (self.utf8 or "").encode()
        return Item(
            payload=payload,
            kind=self.kind,
            encoding=self.encoding,
            reference=self.reference,
            headers=self.headers,
            enqueue_at=self.enqueue_at,
            dedup_key=self.dedup_key,
            partition_key=self.partition_key,
            priority=self.priority,
        )

    @classmethod
    def of(cls, item: Item) -> ProduceItem:
        """The wire form of a library Item."""
        return cls(
            encoding=item.encoding,
            kind=item.kind,
            reference=item.reference,
            enqueue_at=item.enqueue_at,
            bytes=item.payload,
            headers=item.headers,
            dedup_key=item.dedup_key,
            partition_key=item.partition_key,
            priority=item.priority,
        )


class _ItemFields(WireModel):
    """The fields every returned item carries (querator's, beside Querator's)."""

    id: str
    """Stable id of the item in its queue."""
    version: int
    """Bumped by every change; complete/retry/renew name it."""
    queue: str
    """The queue's name."""
    partition: int
    """The partition the item lives in."""
    attempts: int
    """Leases so far."""
    encoding: str
    kind: str
    reference: str
    lease_deadline: Instant | None
    """Deadline of the latest lease."""
    client_id: str | None
    """Client that holds (or last held) the lease."""
    available_at: Instant
    """When the item is (or becomes) leasable."""
    expire_deadline: Instant
    """When the item is dead-lettered if still unfinished."""
    created_at: Instant
    headers: dict[str, str]
    dedup_key: str | None
    source_id: str | None
    """Id in the source queue, for a dead-lettered item."""
    priority: int = 0
    """Among ready items, higher priorities are leased first."""

    @staticmethod
    def common(item: StoredItem) -> dict[str, Any]:
        """The shared fields of a library item."""
        return {
            "id": item.id,
            "version": item.version,
            "queue": item.queue,
            "partition": item.partition,
            "attempts": item.attempts,
            "encoding": item.encoding,
            "kind": item.kind,
            "reference": item.reference,
            "lease_deadline": item.lease_deadline,
            "client_id": item.client_id,
            "available_at": item.available_at,
            "expire_deadline": item.expire_at,
            "created_at": item.created_at,
            "headers": item.headers,
            "dedup_key": item.dedup_key,
            "source_id": item.source_id,
            "priority": item.priority,
        }

    def library_fields(self, payload: bytes) -> dict[str, object]:
        """The keyword arguments of the library's StoredItem / Leased."""
        return {
            "id": self.id,
            "version": self.version,
            "queue": self.queue,
            "partition": self.partition,
            "available_at": self.available_at,
            "lease_deadline": self.lease_deadline,
            "client_id": self.client_id,
            "attempts": self.attempts,
            "expire_at": self.expire_deadline,
            "payload": payload,
            "kind": self.kind,
            "encoding": self.encoding,
            "reference": self.reference,
            "headers": self.headers,
            "dedup_key": self.dedup_key,
            "source_id": self.source_id,
            "created_at": self.created_at,
            "priority": self.priority,
        }


class LeaseItem(_ItemFields):
    """A leased item, as ``/v1/queue.lease`` returns it."""

    bytes: Base64
    """The payload, base64."""

    @classmethod
    def of(cls, item: StoredItem) -> LeaseItem:
        """The wire form of a leased item."""
        return cls.model_construct(bytes=item.payload, **cls.common(item))


class StorageItem(_ItemFields):
    """A stored item, as the ``/v1/storage`` endpoints return it."""

    payload: Base64
    """The payload, base64."""
    is_leased: bool
    """True while a lease holds the item."""
    enqueue_at: Instant | None
    """When a scheduled item becomes leasable (None once due)."""
    dead_deadline: Instant | None = None
    """Querator's; not kept here (expiry dead-letters at ``expire_deadline``)."""
    updated_at: Instant | None = None
    """Querator's; not kept here."""
    max_attempts: int = 0
    """Querator's; a queue setting here, not an item's."""

    @classmethod
    def of(cls, item: StoredItem, now: datetime | None = None) -> StorageItem:
        """The wire form of a stored item."""
        now = now or datetime.now(UTC)
        leased = item.lease_deadline is not None and item.lease_deadline > now
        scheduled = not leased and item.available_at > now
        return cls.model_construct(
            payload=item.payload,
            is_leased=leased,
            enqueue_at=item.available_at if scheduled else None,
            **cls.common(item),
        )


class ItemRef(WireModel):
    """One item version inside a call on one queue."""

    id: str
    """The item's id."""
    version: int | None = None
    """The version the caller holds; absent, the item's current version (as Querator)."""


class QueueItemRef(WireModel):
    """One item version inside a transaction (which may span queues)."""

    queue_name: QueueName
    id: str
    version: int


__all__ = ["ItemRef", "LeaseItem", "ProduceItem", "QueueItemRef", "StorageItem"]
