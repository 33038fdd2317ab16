"""Item ids: ``"<queue_id>.<partition>.<seq>"``, built from internal numbers only.

An id is stable for the item's whole life in its queue: it names the queue's
internal id (so a recreated queue never accepts an old id), the partition the
item lives in (partitions only grow, so it stays valid) and the item's sequence
number in that partition (its FIFO tie-breaker).
"""

from __future__ import annotations

from typing import NamedTuple


class ItemAddress(NamedTuple):
    """Where an item lives, decoded from its id."""

    queue_id: int
    partition: int
    seq: int


def format_id(queue_id: int, partition: int, seq: int) -> str:
    """The public id of the item ``seq`` in ``partition`` of queue ``queue_id``."""
    return f"{queue_id}.{partition}.{seq}"


def parse_id(item_id: object) -> ItemAddress | None:
    """Decode an id; None when it is not one querator could have made."""
    if not isinstance(item_id, str) or len(item_id) > 64:
        return None
    parts = item_id.split(".")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    queue_id, partition, seq = (int(p) for p in parts)
    return ItemAddress(queue_id, partition, seq)
