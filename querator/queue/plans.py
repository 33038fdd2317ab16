"""Pure translation of public calls into backend parameter objects.

No I/O here: validation of items and references, partition routing and the
shape of a transaction are decided once, for the sync and async clients alike.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

from querator.errors import InvalidArgument
from querator.queue.backends.base import (
    ItemKey,
    LeasedBatch,
    NewItem,
    RenewOp,
    RetryOp,
    TableRefs,
    TxnPlan,
)
from querator.queue.ids import ItemAddress, id_prefix, parse_id
from querator.queue.models import Item, Leased, QueueInfo, Ref, TransactResult
from querator.queue.options import TransactOptions
from querator.queue.routing import Spreader, partition_for_key
from querator.queue.validation import (
    MAX_BATCH,
    MAX_PAYLOAD,
    check_batch,
    check_duration,
    check_instant,
    check_keys,
    check_name,
    check_sequence,
)

_NONE: Mapping[str, list[Any]] = MappingProxyType({})
"""An empty mapping no transaction changes (the default of its mapping fields)."""

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
    for index, item in enumerate(items):  # a field's name is spelled only when it is wrong
        if not isinstance(item, Item):
            raise InvalidArgument(
                f"{field}[{index}]", f"must be a querator.Item, got {type(item).__name__}"
            )
        if len(item.payload) > MAX_PAYLOAD:
            raise InvalidArgument(
                f"{field}[{index}].payload", f"must be at most {MAX_PAYLOAD} bytes"
            )
        if len(item.headers) > MAX_HEADERS:
            raise InvalidArgument(
                f"{field}[{index}].headers", f"must hold at most {MAX_HEADERS} entries"
            )
        if item.enqueue_at is not None:
            check_instant(f"{field}[{index}].enqueue_at", item.enqueue_at)
        key = item.partition_key or item.dedup_key
        if key is not None:
            partition = partition_for_key(key, partitions)
        elif partitions == 1:
            partition = 0
        else:
            partition = spreader.next(info.name, partitions)
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
                priority=item.priority,
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


def one_table_refs(info: QueueInfo, items: object) -> TableRefs | None:
    """The items of a ``complete``, ``retry`` or ``renew`` of ``info``'s queue as
    one table's seqs and versions, when that is all they are: a list (or tuple)
    of 1 to MAX_BATCH :class:`Leased` records of the queue, each once, whose ids
    name one partition of it in the spelling :func:`~querator.queue.ids.format_id`
    writes. None for anything else: then :func:`change_request` and
    :meth:`Transaction.plan` decide (and name what is wrong), as for every call.

    This is the same resolution as :func:`item_key`'s for these items, without
    a record per item: a batch's complete costs a fraction of a plan's. A
    :class:`~.backends.base.LeasedBatch` as it was leased knows its rows already.
    """
    if type(items) is LeasedBatch:
        known = items.refs(info.name, info.queue_id)
        if known is not None:
            return known
    return _read_refs(info, items)


def _read_refs(info: QueueInfo, items: object) -> TableRefs | None:
    """:func:`one_table_refs` from the items' ids."""
    address = _first_address(info, items)
    if address is None or not isinstance(items, list | tuple):  # (a list: checked there)
        return None
    name = info.name
    prefix = id_prefix(address.queue_id, address.partition)
    start = len(prefix)
    seqs: list[int] = []
    versions: list[int] = []
    for ref in items:
        if type(ref) is not Leased or ref.queue != name:
            return None
        item_id: object = ref.id
        if type(item_id) is not str or not item_id.startswith(prefix):
            return None
        seq = item_id[start:]  # as format_id spells it: ASCII digits, no leading zero
        if not (seq.isascii() and seq.isdigit() and len(seq) <= 18) or (
            seq[0] == "0" and len(seq) > 1
        ):
            return None
        seqs.append(int(seq))
        versions.append(ref.version)
    if len(set(seqs)) != len(seqs):
        return None
    return TableRefs(name, address.queue_id, address.partition, seqs, versions)


def _first_address(info: QueueInfo, items: object) -> ItemAddress | None:
    """Where the first of a list (or tuple) of 1 to MAX_BATCH items lives, if it
    is a :class:`Leased` record whose id names a partition of ``info``'s queue."""
    if not isinstance(items, list | tuple) or not 0 < len(items) <= MAX_BATCH:
        return None
    first = items[0]
    if type(first) is not Leased:
        return None
    address = parse_id(first.id)
    if (
        address is None
        or address.queue_id != info.queue_id
        or address.partition >= info.settings.partitions
    ):
        return None
    return address


def refs_of(queue: str | None, refs: Iterable[object], field: str) -> list[Ref]:
    """Normalise a list of references."""
    given = check_sequence(field, refs, "Leased items or (id, version) pairs")
    if queue is None:
        return [as_ref(None, ref, f"{field}[{i}]") for i, ref in enumerate(given)]
    if given:  # once for all: the common case below names no other queue
        check_name(f"{field}[0].queue", queue)
    found: list[Ref] = []
    for i, ref in enumerate(given):
        if type(ref) is Leased and ref.queue == queue:  # built by this library, trusted
            found.append(Ref(queue, ref.id, ref.version))
        else:
            found.append(as_ref(queue, ref, f"{field}[{i}]"))
    return found


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
        delete=keys("delete"),
        produce=produce,
    )


class Transaction(NamedTuple):
    """One checked transaction request of the queue service (a ``transact``,
    ``commit``, ``complete``, ``retry`` or ``renew``), before the queues it names
    are looked up."""

    groups: Mapping[str, Sequence[Ref]]
    """``complete``, ``retry``, ``renew``, ``depends`` and ``delete``: the items of each role."""
    produce: Mapping[str, Sequence[Item]] = _NONE
    retry_at: datetime | None = None
    dead: bool = False
    extend: float | None = None
    client_id: str | None = None
    """Who leases the ``claimed`` items (given with them only)."""
    claimed: Mapping[str, Sequence[Item]] = _NONE
    """``produce_leased``: items produced like ``produce``, each one leasable at
    once leased to ``client_id`` for its queue's ``lease_timeout`` (a hand-off to
    yourself that skips the round trip of a ``lease``). ``TransactResult.leased``
    holds, per queue and in order, the :class:`Leased` item or None (scheduled
    later, or a dedup hit on an item another client holds)."""
    lookup: Mapping[str, list[str]] = _NONE
    """Queue -> dedup keys: which items hold those keys once the transaction is
    applied (``TransactResult.found``), its own changes included and whatever
    other clients committed before it. PostgreSQL answers in the same statement;
    SQLite and memory right after, outside the transaction."""
    silent: frozenset[str] = frozenset()
    """Queues this transaction does not wake: their waiting consumers and watchers
    are not notified (records nobody waits for; the items are leasable all the
    same, found at a waiter's next look, within its wait cap)."""
    wake: frozenset[str] = frozenset()
    """Names this transaction also wakes at commit, in every client of the store:
    a waiter watching a name of its own (``AsyncQueueClient.watch``) is woken alone."""
    durable: bool = True
    """False: commit without waiting for the flush to disk (PostgreSQL; the other
    stores ignore it), only for changes whose loss in a crash of the server is
    harmless."""
    reason: str | None = None
    """Why retried items are retried (kept with those this dead-letters)."""

    def queue_names(self) -> set[str]:
        """Every queue the transaction names (their dead queues are looked up too)."""
        names = {ref.queue for refs in self.groups.values() for ref in refs}
        return names | set(self.produce) | set(self.claimed) | set(self.lookup)

    def plan(
        self,
        queues: Mapping[str, QueueInfo],
        spreader: Spreader,
        carrier: Callable[[str], Mapping[str, str] | None],
    ) -> TxnPlan:
        """The backend's plan, produced items routed, each with ``carrier(queue)``
        as its trace context."""

        def routed(
            field: str, by_queue: Mapping[str, Sequence[Item]]
        ) -> list[tuple[str, Sequence[NewItem]]]:
            return [
                (
                    name,
                    route_items(queues[name], items, spreader, f"{field}[{name!r}]", carrier(name)),
                )
                for name, items in by_queue.items()
            ]

        made = build_plan(
            queues,
            self.groups,
            routed("produce", self.produce),
            self.retry_at,
            self.dead,
            self.extend,
        )
        if self.reason is not None:
            made = replace(made, retry=[replace(op, reason=self.reason) for op in made.retry])
        if self.claimed:
            made = replace(
                made, claim=routed("produce_leased", self.claimed), client_id=self.client_id
            )
        if self.lookup or self.silent:
            made = replace(made, lookup=list(self.lookup.items()), silent=self.silent)
        if self.wake or not self.durable:
            made = replace(made, wake=self.wake, durable=self.durable)
        return made

    def woken(self, queues: Mapping[str, QueueInfo], result: TransactResult) -> set[str]:
        """The queues whose local waiters to wake once applied: where something may
        have become leasable (completes, renews and items leased to the caller make
        nothing new available), less the silent ones."""
        woken = {name for name, items in self.produce.items() if items}
        for ref in self.groups.get("retry", ()):
            woken.add(ref.queue)
            dead_queue = queues[ref.queue].settings.dead_queue
            if dead_queue:
                woken.add(dead_queue)
        woken |= {name for name, got in result.leased.items() if None in got}
        return (woken - self.silent) | self.wake


def change_request(
    queue: str,
    role: str,
    items: Sequence[RefLike],
    *,
    retry_at: datetime | None = None,
    dead: bool = False,
    extend: float | None = None,
    reason: str | None = None,
) -> Transaction:
    """The checked :class:`Transaction` of a ``complete``, ``retry`` or ``renew``
    (``role``) of ``items`` of ``queue``."""
    check_name("queue", queue)
    refs = refs_of(queue, items, "items")
    check_batch("items", len(refs))
    check_unique({role: refs})
    return Transaction({role: refs}, _NONE, retry_at, dead, extend, reason=reason)


def commit_request(
    options: TransactOptions,
    produce_leased: Mapping[str, Sequence[Item]] | None,
    client_id: str | None,
    lookup: Mapping[str, Sequence[str]] | None,
    silent: Collection[str],
    wake: Collection[str] = (),
    durable: bool = True,
) -> Transaction:
    """The checked :class:`Transaction` of a ``commit`` (``options``: its
    :class:`~querator.queue.options.TransactOptions`, names already checked)."""
    if produce_leased and client_id is None:
        raise InvalidArgument("client_id", "is required with produce_leased")
    if client_id is not None:
        check_name("client_id", client_id)
    groups = {
        "complete": refs_of(None, options.get("complete", ()), "complete"),
        "retry": refs_of(None, options.get("retry", ()), "retry"),
        "renew": refs_of(None, options.get("renew", ()), "renew"),
        "depends": refs_of(None, options.get("depends", ()), "depends"),
        "delete": refs_of(None, options.get("delete", ()), "delete"),
    }
    for role, refs in groups.items():
        if len(refs) > MAX_BATCH:
            check_batch(role, len(refs))
    produce = options.get("produce") or {}
    if isinstance(wake, str):
        raise InvalidArgument("wake", "must be a list of names, not one string")
    woken = frozenset(check_name("wake", name) for name in wake)
    if not any(groups.values()) and not produce and not produce_leased and not woken:
        check_batch("transact", 0)  # a wake-only commit is a transaction of its own
    keys = {name: check_keys(keys) for name, keys in (lookup or {}).items()}
    if isinstance(silent, str):
        raise InvalidArgument("silent", "must be a list of queue names, not one string")
    quiet = frozenset(check_name("silent", name) for name in silent)
    request = Transaction(
        groups,
        produce,
        options.get("retry_at"),
        extend=options.get("extend"),
        client_id=client_id if produce_leased else None,
        claimed=produce_leased or {},
        lookup=keys,
        silent=quiet,
        wake=woken,
        durable=bool(durable),
    )
    check_unique(request.groups)
    _check_produce("produce", request.produce)
    _check_produce("produce_leased", request.claimed)
    return request


def _check_produce(field: str, by_queue: object) -> None:
    """A transaction's ``produce`` (or ``produce_leased``): a dict of lists."""
    if not isinstance(by_queue, Mapping):
        raise InvalidArgument(field, "must be a dict: queue name -> list of querator.Item")
    for name, items in by_queue.items():
        check_sequence(f"{field}[{name!r}]", items, "querator.Item")
