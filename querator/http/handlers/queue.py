"""Handlers of ``/v1/queue.*``: each decodes nothing and decides nothing; it
calls the library's :class:`~querator.AsyncQuerator` and shapes the answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from querator.http.wire.items import ItemRef, LeaseItem, QueueItemRef, StorageItem
from querator.http.wire.queue import (
    ClearReply,
    ClearRequest,
    CompleteRequest,
    GaugesReply,
    GaugesRequest,
    LeaseReply,
    LeaseRequest,
    LookupReply,
    LookupRequest,
    ProduceReply,
    ProduceRequest,
    QueueRequest,
    RenewReply,
    RenewRequest,
    RetryRequest,
    ScanKeysReply,
    ScanKeysRequest,
    StatsReply,
    TransactReply,
    TransactRequest,
)
from querator.http.wire.types import LONG_POLL_MAX
from querator.queue.ids import parse_id
from querator.queue.models import Ref
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_name


async def produce(aq: AsyncQueueClient, body: ProduceRequest) -> ProduceReply:
    """Add items; reply with their ids."""
    items = [item.to_item() for item in body.items]
    return ProduceReply(ids=await aq.produce(body.queue_name, items))


async def lease(state: Any, body: LeaseRequest) -> LeaseReply:
    """Long-poll for up to ``batch_size`` items (454 when none came)."""
    aq: AsyncQueueClient = state.aq
    done = await refs(aq, body.queue_name, [], body.complete) if body.complete else ()
    leased = await state.unless_stopping(
        lambda: aq.lease(
            body.queue_name,
            client_id=body.client_id,
            batch_size=body.batch_size,
            timeout=min(body.request_timeout, LONG_POLL_MAX),
            kinds=body.kinds,
            complete=done,
        )
    )
    return LeaseReply(
        queue_name=body.queue_name,
        partition=leased[0].partition,
        items=[LeaseItem.of(item) for item in leased],
    )


async def refs(
    aq: AsyncQueueClient, queue: str, ids: Sequence[str], items: Sequence[ItemRef]
) -> list[Ref]:
    """References with versions: bare ids (as Querator sends them) take the
    item's current version, so a lease that is not held fails as not leased."""
    check_name("queue", queue)
    found: list[Ref] = []
    bare = list(ids) + [item.id for item in items if item.version is None]
    for item_id in bare:
        address = parse_id(item_id)
        if address is None:
            raise ValueError(
                f"invalid storage id; '{item_id}': expected '<queue_id>.<partition>.<seq>'"
            )
        found.append(Ref(queue, item_id, await _current_version(aq, queue, item_id)))
    found += [Ref(queue, i.id, i.version) for i in items if i.version is not None]
    return found


async def _current_version(aq: AsyncQueueClient, queue: str, item_id: str) -> int:
    address = parse_id(item_id)
    info = await aq.queue_info(queue)
    if (
        address is None
        or address.queue_id != info.queue_id  # another queue's item: not one of this queue
        or address.partition >= info.settings.partitions
    ):
        return -1
    page = await aq.list_items(queue, partition=address.partition, pivot=item_id, limit=1)
    return page[0].version if page and page[0].id == item_id else -1


async def complete(aq: AsyncQueueClient, body: CompleteRequest) -> None:
    """Complete leased items, all or nothing."""
    body.size()
    await aq.complete(body.queue_name, await refs(aq, body.queue_name, body.ids, body.items))


async def retry(aq: AsyncQueueClient, body: RetryRequest) -> None:
    """Give leased items back (or dead-letter them), all or nothing."""
    first = body.items[0]
    chosen = await refs(aq, body.queue_name, (), body.items)
    await aq.retry(
        body.queue_name, chosen, retry_at=first.retry_at, dead=first.dead, reason=first.reason
    )


async def renew(aq: AsyncQueueClient, body: RenewRequest) -> RenewReply:
    """Extend held leases."""
    chosen = await refs(aq, body.queue_name, (), body.items)
    renewed = await aq.renew(body.queue_name, chosen, extend=body.extend)
    return RenewReply(items=[LeaseItem.of(item) for item in renewed])


def _refs(given: Sequence[QueueItemRef]) -> list[Ref]:
    return [Ref(ref.queue_name, ref.id, ref.version) for ref in given]


async def transact(aq: AsyncQueueClient, body: TransactRequest) -> TransactReply:
    """The atomic transaction of the library, as one call."""
    result = await aq.commit(
        complete=_refs(body.complete),
        retry=_refs(body.retry),
        renew=_refs(body.renew),
        depends=_refs(body.depends),
        delete=_refs(body.delete),
        produce={q: [i.to_item() for i in items] for q, items in body.produce.items()},
        retry_at=body.retry_at,
        extend=body.extend,
        produce_leased={
            q: [i.to_item() for i in items] for q, items in body.produce_leased.items()
        },
        client_id=body.client_id,
        lookup=body.lookup,
        silent=body.silent,
    )
    return TransactReply(
        produced=result.produced,
        renewed=[LeaseItem.of(item) for item in result.renewed],
        leased={
            q: [LeaseItem.of(item) if item else None for item in got]
            for q, got in result.leased.items()
        },
        found={
            q: {key: StorageItem.of(item) for key, item in by_key.items()}
            for q, by_key in result.found.items()
        },
    )


async def stats(aq: AsyncQueueClient, body: QueueRequest) -> StatsReply:
    """Counts per partition."""
    return StatsReply.of(await aq.stats(body.queue_name))


async def gauges(aq: AsyncQueueClient, body: GaugesRequest) -> GaugesReply:
    """Bounded counts per partition, for metrics."""
    return GaugesReply.of(await aq.gauges(body.queue_name, limit=body.limit))


async def clear(aq: AsyncQueueClient, body: ClearRequest) -> ClearReply:
    """Delete every item not under a live lease (all with ``destructive``)."""
    body.check()
    return ClearReply(deleted=await aq.clear(body.queue_name, destructive=body.destructive))


async def scan_keys(aq: AsyncQueueClient, body: ScanKeysRequest) -> ScanKeysReply:
    """Items whose dedup key starts with a prefix, in key order, paged."""
    found = await aq.scan_keys(body.queue_name, body.prefix, after=body.after, limit=body.limit)
    return ScanKeysReply(items=[StorageItem.of(item) for item in found])


async def lookup(aq: AsyncQueueClient, body: LookupRequest) -> LookupReply:
    """Items holding the given dedup keys."""
    found = await aq.lookup(body.queue_name, body.dedup_keys)
    return LookupReply(items={key: StorageItem.of(item) for key, item in found.items()})
