"""Item ids: ``"<queue_id>.<partition>.<seq>"``, built from internal numbers only.

An id is stable for the item's whole life in its queue: it names the queue's
internal id (so a recreated queue never accepts an old id), the partition the
item lives in (partitions only grow, so it stays valid) and the item's sequence
number in that partition (its FIFO tie-breaker).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple


class ItemAddress(NamedTuple):
    """Where an item lives, decoded from its id."""

    queue_id: int
    partition: int
    seq: int


def format_id(queue_id: int, partition: int, seq: int) -> str:
    """The public id of the item ``seq`` in ``partition`` of queue ``queue_id``."""
    return f"{queue_id}.{partition}.{seq}"


def id_prefix(queue_id: int, partition: int) -> str:
    """What the ids of one partition table start with: ``format_id(q, p, seq)``
    is ``id_prefix(q, p) + str(seq)`` (for the loops that build or read many)."""
    return f"{queue_id}.{partition}."


_ID = re.compile(r"(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})")
"""The canonical spelling :func:`format_id` writes: ASCII digits, no sign, no
leading zero, each number below 10**18 (so it fits a PostgreSQL bigint)."""


def parse_id(item_id: object) -> ItemAddress | None:
    """Decode an id; None when it is not one querator could have made."""
    if type(item_id) is not str:
        return None
    found = _ID.fullmatch(item_id)
    if found is None:
        return None
    queue_id, partition, seq = found.groups()
    return ItemAddress(int(queue_id), int(partition), int(seq))


def seqs_by_partition(item_ids: Iterable[str]) -> dict[int, list[int]]:
    """The sequence numbers of ``item_ids`` (ids querator made) per partition."""
    grouped: dict[int, list[int]] = {}
    for item_id in item_ids:
        address = parse_id(item_id)
        if address is None:
            raise ValueError(f"not an item id: {item_id!r}")
        grouped.setdefault(address.partition, []).append(address.seq)
    return grouped
