"""Item operations outside leasing: counts, gauges, listings, key look-ups,
deletes and clears of one queue (:class:`ItemAdmin`, a part of the queue service)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from querator.errors import InvalidArgument
from querator.queue.backends.base import Backend
from querator.queue.ids import parse_id
from querator.queue.models import QueueGauges, QueueInfo, QueueStats, StoredItem
from querator.queue.validation import (
    MAX_BATCH,
    check_batch,
    check_count,
    check_keys,
    check_sequence,
    key_range,
)
from querator.telemetry import queue_gauges


class ItemAdmin:
    """The item operations of one client that read or delete without leasing;
    ``opened`` returns its backend (or raises when the client is closed),
    ``queue_info`` a queue's cached info."""

    def __init__(
        self, opened: Callable[[], Backend], queue_info: Callable[[str], Awaitable[QueueInfo]]
    ) -> None:
        self._opened = opened
        self._queue_info = queue_info

    async def stats(self, queue: str) -> QueueStats:
        """Counts per partition: total, leased, scheduled, dead-lettered, oldest age."""
        backend = self._opened()
        info = await self._queue_info(queue)
        return QueueStats(queue=queue, partitions=await backend.stats(info))

    async def gauges(self, queue: str, *, limit: int = queue_gauges.LIMIT) -> QueueGauges:
        """Cheap counts per partition for metrics: depth, leased, scheduled and the
        age of the oldest leasable item, each read with a probe of at most ``limit``
        rows per partition (exact below it; see :class:`PartitionGauges` for the
        estimates past it). :meth:`stats` counts exactly and reads every row."""
        backend = self._opened()
        info = await self._queue_info(queue)
        check_count("limit", limit, 1, 1_000_000)
        return QueueGauges(queue=queue, partitions=await backend.gauges(info, limit))

    async def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of one partition in id order, starting at ``pivot`` (inclusive)."""
        return await self._list(queue, partition, pivot, limit, scheduled_only=False)

    async def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Scheduled (not yet due, never-leased or retried-later) items, like list_items."""
        return await self._list(queue, partition, pivot, limit, scheduled_only=True)

    async def _list(
        self, queue: str, partition: int, pivot: str | None, limit: int, scheduled_only: bool
    ) -> list[StoredItem]:
        backend = self._opened()
        info = await self._queue_info(queue)
        check_count("partition", partition, 0, info.settings.partitions - 1)
        check_count("limit", limit, 1, MAX_BATCH)
        pivot_seq = None
        if pivot is not None:
            address = parse_id(pivot)
            if address is None or address.queue_id != info.queue_id:
                raise InvalidArgument("pivot", f"{pivot!r} is not an item id of queue {queue!r}")
            pivot_seq = address.seq
        return await backend.list_items(info, partition, pivot_seq, limit, scheduled_only)

    async def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        """The items of ``queue`` that hold any of ``dedup_keys`` now, by key.

        Keys held by no item are absent from the result. 1 to 1000 keys.
        """
        backend = self._opened()
        info = await self._queue_info(queue)
        found = await backend.lookup(info, check_keys(dedup_keys))
        return {item.dedup_key: item for item in found if item.dedup_key is not None}

    async def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of ``queue`` whose dedup key starts with ``prefix``, in key order.

        Keys compare by code point (as Python compares strings), across all
        partitions. Pass the last key of a page as ``after`` for the next page.
        Every backend answers from its dedup-key index, so a page costs
        ``limit`` rows whatever the queue holds. 1 to 1000 items a page.
        """
        backend = self._opened()
        info = await self._queue_info(queue)
        low, include_low, high = key_range(prefix, after)
        check_count("limit", limit, 1, MAX_BATCH)
        return await backend.scan_keys(info, low, include_low, high, limit)

    async def delete_items(self, queue: str, ids: Sequence[str]) -> None:
        """Delete items by id whatever their state; all or nothing."""
        backend = self._opened()
        info = await self._queue_info(queue)
        check_batch("ids", len(check_sequence("ids", ids, "item ids")))
        keys = []
        for item_id in ids:
            address = parse_id(item_id)
            if address is None or address.queue_id != info.queue_id:
                keys.append((str(item_id), 0, -1))
            else:
                keys.append((item_id, address.partition, address.seq))
        if len({k[0] for k in keys}) != len(keys):
            raise InvalidArgument("ids", "an id appears more than once")
        await backend.delete_items(info, keys)

    async def clear(self, queue: str, *, destructive: bool = False) -> int:
        """Delete every item not under a live lease (every item when
        ``destructive``); returns how many were deleted."""
        backend = self._opened()
        return await backend.clear(await self._queue_info(queue), destructive)
