"""What the HTTP client sends and builds: request bodies from library values
(checked with the library's own rules first) and library values from replies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from querator.errors import InvalidArgument, Unavailable
from querator.http.durations import format_duration
from querator.http.wire import admin as wa
from querator.http.wire.items import LeaseItem, ProduceItem, StorageItem
from querator.queue.models import Item, Leased, QueueInfo, QueueSettings, StoredItem
from querator.queue.plans import refs_of
from querator.queue.validation import check_batch, check_instant, check_sequence


def leased_of(item: LeaseItem) -> Leased:
    """A library Leased from its wire form."""
    return Leased.model_validate(item.library_fields(item.bytes))


def stored_of(item: StorageItem) -> StoredItem:
    """A library StoredItem from its wire form."""
    return StoredItem.model_validate(item.library_fields(item.payload))


def wire_items(
    field: str, items: Sequence[Item], trace: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Produce items as JSON, after the library's checks of them; ``trace`` (the
    producer span's context) joins the headers of items without a ``traceparent``."""
    check_batch(field, len(check_sequence(field, items, "querator.Item")))
    wire = []
    for index, item in enumerate(items):
        if not isinstance(item, Item):
            raise InvalidArgument(
                f"{field}[{index}]", f"must be a querator.Item, got {type(item).__name__}"
            )
        check_instant(f"{field}[{index}].enqueue_at", item.enqueue_at)
        body = ProduceItem.of(item).model_dump(mode="json", exclude_none=True)
        if trace is not None and "traceparent" not in item.headers:
            body["headers"] = {**item.headers, **trace}
        wire.append(body)
    return wire


def refs(queue: str | None, given: Sequence[object], field: str) -> list[dict[str, Any]]:
    """Item references as JSON (with ``queue_name`` when ``queue`` is None)."""
    return [
        {"queue_name": r.queue, "id": r.id, "version": r.version}
        if queue is None
        else {"id": r.id, "version": r.version}
        for r in refs_of(queue, given, field)
    ]


def key_list(keys: Sequence[str]) -> list[str]:
    """Dedup keys as a list (one string is refused, as the library refuses it)."""
    if isinstance(keys, str):
        raise InvalidArgument("dedup_keys", "must be a list of keys, not one string")
    return list(keys)


def settings_body(name: str, settings: QueueSettings | None) -> dict[str, Any]:
    """The body of queues.create / queues.update for ``settings``."""
    if settings is None:
        settings = QueueSettings()
    if not isinstance(settings, QueueSettings):
        raise InvalidArgument("settings", f"must be QueueSettings, got {type(settings).__name__}")
    return {
        "queue_name": name,
        "dead_queue": settings.dead_queue or "",
        "reference": settings.reference,
        "lease_timeout": format_duration(settings.lease_timeout),
        "expire_timeout": format_duration(settings.expire_timeout),
        "max_attempts": settings.max_attempts,
        "requested_partitions": settings.partitions,
    }


def info(reply: wa.CreateReply) -> QueueInfo:
    """The library QueueInfo of a create/update reply."""
    if reply.queue is None:
        raise Unavailable("the server's reply names no queue")
    return reply.queue.library()
