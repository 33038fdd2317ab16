"""Pure translation of public calls into backend parameter objects.

No I/O here: validation of items and references, partition routing and the
shape of a transaction are decided once, for the sync and async clients alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from querator.errors import InvalidArgument
from querator.queue.backends.base import ItemKey, NewItem, RenewOp, RetryOp, TxnPlan
from querator.queue.ids import parse_id
from querator.queue.models import Item, Leased, QueueInfo, Ref
from querator.queue.routing import Spreader, partition_for_key
from querator.queue.validation import (
    MAX_PAYLOAD,
    check_batch,
    check_duration,
    check_instant,
    check_name,
    check_sequence,
)


@dataclass(frozen=True, slots=True)
class Extra:
    """The knobs of ``commit`` beyond ``transact``'s (see ``AsyncQueueClient.commit``)."""

    silent: frozenset[str] = frozenset()
    """Queues the transaction does not wake."""
    wake: frozenset[str] = frozenset()
    """Names it wakes besides the queues it changes."""
    durable: bool = True
    """False: commit without waiting for the flush to disk."""


RefLike = Leased | Ref | tuple[str, int]
"""What complete/retry/renew accept: a leased item, a Ref, or an (id, version) pair."""
MAX_HEADERS = 64
"""The most headers one item may carry."""


def route_items(
    info: QueueInfo,
    items: Sequence[Item],
    spreader: Spreader,
    field: str = "items",
    trace: Mapping[str, str] | None = None,
) -> list[NewItem]:
    """Validate ``items`` and assign each a partition of ``info``'s queue.

    ``trace`` (the producer span's context as headers) is added to the headers
    of every item that carries no ``traceparent`` of its own."""
    check_batch(field, len(check_sequence(field, items, "querator.Item")))
    partitions = info.settings.partitions
    routed = []
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        if not isinstance(item, Item):
            raise InvalidArgument(where, f"must be a querator.Item, got {type(item).__name__}")
        if len(item.payload) > MAX_PAYLOAD:
            raise InvalidArgument(f"{where}.payload", f"must be at most {MAX_PAYLOAD} bytes")
        if len(item.headers) > MAX_HEADERS:
            raise InvalidArgument(f"{where}.headers", f"must hold at most {MAX_HEADERS} entries")
        check_instant(f"{where}.enqueue_at", item.enqueue_at)
        key = item.partition_key or item.dedup_key
        partition = (
            partition_for_key(key, partitions)
            if key is not None
            else spreader.next(info.name, partitions)
        )
        routed.append(
            NewItem(
                partition=partition,
                payload=item.payload,
                kind=item.kind,
                encoding=item.encoding,
                reference=item.reference,
                headers=item.headers
                if trace is None or "traceparent" in item.headers
                else {**item.headers, **trace},
                available_at=item.enqueue_at,
                dedup_key=item.dedup_key,
            )
        )
    return routed


VERSION_LIMIT = 2**63
"""Versions are 64-bit signed integers: a reference beyond cannot name any item."""


def as_ref(queue: str | None, ref: object, field: str) -> Ref:
    """Normalise one reference; ``queue`` is the queue the call names, if any."""
    if type(ref) is Leased and (queue is None or ref.queue == queue):
        # The common case, built by this library with trusted field types.
        return Ref(check_name(f"{field}.queue", ref.queue), ref.id, ref.version)
    if isinstance(ref, Leased):
        found = Ref(ref.queue, ref.id, ref.version)
    elif isinstance(ref, Ref):
        found = ref
    elif isinstance(ref, tuple) and len(ref) == 2 and queue is not None:
        found = Ref(queue, *ref)
    else:
        shape = "a Leased item, a Ref" + (" or an (id, version) pair" if queue else "")
        raise InvalidArgument(field, f"must be {shape}, got {ref!r}")
    if not isinstance(found.id, str) or isinstance(found.version, bool):
        raise InvalidArgument(field, f"id must be a str and version an int, got {ref!r}")
    if not isinstance(found.version, int):
        raise InvalidArgument(field, f"version must be an int, got {found.version!r}")
    if not -VERSION_LIMIT <= found.version < VERSION_LIMIT:
        raise InvalidArgument(field, f"version must be below 2^63 in size, got {found.version}")
    if queue is not None and found.queue != queue:
        raise InvalidArgument(field, f"item {found.id} belongs to {found.queue!r}, not {queue!r}")
    check_name(f"{field}.queue", found.queue)
    return found


def item_key(info: QueueInfo, ref: Ref) -> ItemKey:
    """Resolve a reference; an id that cannot be in this queue resolves to seq -1.

    Such keys reach the backend like any other and come back MISSING, so one
    Conflict lists every failed check.
    """
    address = parse_id(ref.id)
    if (
        address is None
        or address.queue_id != info.queue_id
        or address.partition >= info.settings.partitions
    ):
        return ItemKey(ref.queue, ref.id, info.queue_id, 0, -1, ref.version)
    return ItemKey(ref.queue, ref.id, info.queue_id, address.partition, address.seq, ref.version)


def refs_of(queue: str | None, refs: Iterable[object], field: str) -> list[Ref]:
    """Normalise a list of references."""
    given = check_sequence(field, refs, "Leased items or (id, version) pairs")
    return [as_ref(queue, ref, f"{field}[{i}]") for i, ref in enumerate(given)]


def check_unique(groups: Mapping[str, Sequence[Ref]]) -> None:
    """An item may appear once per call, in one role."""
    seen: set[tuple[str, str]] = set()
    for field, refs in groups.items():
        for ref in refs:
            if (ref.queue, ref.id) in seen:
                raise InvalidArgument(field, f"item {ref.id} appears more than once in one call")
            seen.add((ref.queue, ref.id))


def build_plan(
    queues: Mapping[str, QueueInfo],
    refs: Mapping[str, Sequence[Ref]],
    produce: Sequence[tuple[str, Sequence[NewItem]]],
    retry_at: datetime | None,
    dead: bool,
    extend: float | None,
) -> TxnPlan:
    """The backend's view of one transaction; ``queues`` holds every queue named."""
    check_instant("retry_at", retry_at)
    if extend is not None:
        check_duration("extend", extend)

    def keys(field: str) -> list[ItemKey]:
        return [item_key(queues[r.queue], r) for r in refs.get(field, ())]

    return TxnPlan(
        queues=queues,
        complete=keys("complete"),
        retry=[RetryOp(key, retry_at, dead) for key in keys("retry")],
        renew=[
            RenewOp(key, extend or queues[key.queue].settings.lease_timeout)
            for key in keys("renew")
        ],
        depends=keys("depends"),
        produce=produce,
    )
