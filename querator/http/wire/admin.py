"""Bodies of ``/v1/queues.*`` and ``/v1/storage/*`` (Querator's shapes)."""

from __future__ import annotations

from pydantic import Field, StrictInt

from querator.http.wire.items import StorageItem
from querator.http.wire.queue import Reply
from querator.http.wire.types import Base64, Duration, Instant, QueueName, WireModel
from querator.queue.models import Item, QueueSettings
from querator.queue.models import QueueInfo as LibraryQueueInfo


class PartitionInfo(WireModel):
    """One partition of a queue."""

    partition: int


class QueueInfo(WireModel):
    """A queue and its settings: the body of create and update, the answer of info.

    On update, fields left out keep their current values.
    """

    queue_name: QueueName
    dead_queue: str | None = None
    """Queue that receives exhausted or expired items ("" or absent: none)."""
    reference: str | None = None
    lease_timeout: Duration | None = None
    expire_timeout: Duration | None = None
    max_attempts: int | None = None
    """Leases before dead-lettering; 0 = unlimited."""
    requested_partitions: int | None = None
    """Partition count (may only grow)."""
    partitions: list[PartitionInfo] = Field(default_factory=list)
    """Read only: the partitions."""
    created_at: Instant | None = None
    """Read only."""
    updated_at: Instant | None = None
    """Querator's; not kept here."""
    namespace: str = ""
    """Querator's; accepted and ignored (one namespace)."""
    queue_id: int | None = None
    """Read only: internal id (querator)."""
    exist_ok: bool = False
    """Create only: an existing queue is no error (querator)."""
    paused: bool = False
    """Read only: its items are not leased until it is resumed (querator;
    ``/v1/queues.pause``, ``/v1/queues.resume``)."""

    def settings(self, base: QueueSettings) -> QueueSettings:
        """``base`` with the fields given here (raises InvalidArgument)."""
        given = {
            "reference": self.reference,
            "lease_timeout": self.lease_timeout,
            "expire_timeout": self.expire_timeout,
            "max_attempts": self.max_attempts,
            "partitions": self.requested_partitions,
        }
        fields = base.model_dump()
        fields.update({key: value for key, value in given.items() if value is not None})
        if self.dead_queue is not None:
            fields["dead_queue"] = self.dead_queue or None
        return QueueSettings(**fields)

    @classmethod
    def of(cls, info: LibraryQueueInfo) -> QueueInfo:
        """The wire form of a library QueueInfo."""
        settings = info.settings
        return cls.model_construct(
            queue_name=info.name,
            dead_queue=settings.dead_queue or "",
            reference=settings.reference,
            lease_timeout=settings.lease_timeout,
            expire_timeout=settings.expire_timeout,
            max_attempts=settings.max_attempts,
            requested_partitions=settings.partitions,
            partitions=[PartitionInfo(partition=p) for p in range(settings.partitions)],
            created_at=info.created_at,
            queue_id=info.queue_id,
            exist_ok=False,
            paused=info.paused,
        )

    def library(self) -> LibraryQueueInfo:
        """The library's QueueInfo (client side)."""
        return LibraryQueueInfo.model_validate(
            {
                "name": self.queue_name,
                "queue_id": self.queue_id or 0,
                "settings": self.settings(QueueSettings()),
                "created_at": self.created_at,
                "paused": self.paused,
            }
        )


class CreateReply(Reply):
    """The reply to create and update, with the queue as stored (querator)."""

    queue: QueueInfo | None = None


class ListRequest(WireModel):
    """``/v1/queues.list``: queues in name order from ``pivot`` (inclusive)."""

    pivot: str = ""
    limit: int = 0
    """1 to 1000; 0 means 100."""
    namespace: str = ""
    """Querator's; accepted and ignored (one namespace)."""


class ListReply(WireModel):
    """A page of queues."""

    items: list[QueueInfo]


class DeleteRequest(WireModel):
    """``/v1/queues.delete``."""

    queue_name: QueueName
    force: bool = False
    """Delete the queue's items with it; without it a queue that holds items is
    refused (QueueNotEmpty, naming the count)."""


class ItemsListRequest(WireModel):
    """``/v1/storage/items.list`` and ``/v1/storage/scheduled.list``."""

    queue_name: QueueName
    partition: int = 0
    pivot: str = ""
    """Start at this id (inclusive)."""
    limit: int = 0
    """1 to 1000; 0 means 100."""


class ItemsListReply(WireModel):
    """A page of stored items."""

    items: list[StorageItem]


class ImportItem(WireModel):
    """An item to import: Querator's stored item; fields a new item cannot keep
    (its id, attempts, deadlines) are accepted and ignored."""

    payload: Base64 = b""
    kind: str = ""
    encoding: str = ""
    reference: str = ""
    enqueue_at: Instant | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    dedup_key: str | None = None
    id: str | None = None
    source_id: str | None = None
    is_leased: bool | None = None
    lease_deadline: Instant | None = None
    expire_deadline: Instant | None = None
    dead_deadline: Instant | None = None
    created_at: Instant | None = None
    updated_at: Instant | None = None
    attempts: int | None = None
    max_attempts: int | None = None
    priority: StrictInt = 0
    """Kept by the imported item (querator)."""

    def to_item(self) -> Item:
        """The library Item to produce (raises InvalidArgument)."""
        return Item(
            payload=self.payload,
            kind=self.kind,
            encoding=self.encoding,
            reference=self.reference,
            enqueue_at=self.enqueue_at,
            headers=self.headers,
            dedup_key=self.dedup_key,
            priority=self.priority,
        )


class ImportRequest(WireModel):
    """``/v1/storage/items.import``: add items as they are given (new ids)."""

    queue_name: QueueName
    partition: int = 0
    """Ignored: items are routed as produce routes them."""
    items: list[ImportItem] = Field(default_factory=list, validate_default=True)


class ItemsDeleteRequest(WireModel):
    """``/v1/storage/items.delete``: delete items whatever their state."""

    queue_name: QueueName
    partition: int = 0
    """Ignored: an id names its partition."""
    ids: list[str] = Field(default_factory=list, validate_default=True)


class MaintenanceReply(Reply):
    """``/v1/queues.maintain`` (querator): items dead-lettered now."""

    moved: int = 0
