"""Which partition an item goes to, and in which order a lease visits partitions.

Keyed items (``partition_key``, else ``dedup_key``) go to a partition chosen
by a stable hash of the key, so the same key always lands in the same partition
and keeps FIFO order there. Unkeyed items are dealt round-robin so partitions
fill evenly. A lease starts at a random partition and wraps around, so many
consumers share all partitions without any assignment.
"""

from __future__ import annotations

import hashlib
import itertools
import random


def partition_for_key(key: str, partitions: int) -> int:
    """The partition of a keyed item: stable across processes and versions."""
    if partitions == 1:
        return 0
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


class Spreader:
    """Round-robin dealer of unkeyed items, one counter per queue."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def next(self, queue: str, partitions: int) -> int:
        """The next partition for an unkeyed item of ``queue``."""
        counter = self._counters.get(queue)
        if counter is None:
            counter = self._counters[queue] = itertools.count(random.randrange(1 << 16))
        return next(counter) % partitions


def lease_order(partitions: int) -> list[int]:
    """All partitions, starting at a random one."""
    start = random.randrange(partitions)
    return [(start + i) % partitions for i in range(partitions)]
