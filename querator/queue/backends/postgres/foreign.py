"""Producing on a connection the application owns, inside its open transaction.

The statements are the ones :func:`~.items.insert_items` runs (one insert per
partition, its ``pg_notify`` sent by the same commit), written sans I/O: a
generator yields each statement with its parameters and receives its rows, so
a sync ``psycopg.Connection`` and an ``AsyncConnection`` drive the same steps
(:mod:`querator.queue.foreign`). The items exist, and the queue's listeners are
woken, exactly when the application's transaction commits.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from querator.errors import Unavailable
from querator.queue.backends.base import InsertPlan, NewItem
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import text_array
from querator.queue.backends.postgres.items import insert_params
from querator.queue.ids import format_id
from querator.queue.models import QueueInfo

__all__ = ["Statement", "produce_steps"]

Statement = tuple[sql.Composable, dict[str, Any]]
"""One statement to run and its bound parameters."""


def produce_steps(
    names: stmt.Names, queue: QueueInfo, items: Sequence[NewItem], now: datetime | None
) -> Generator[Statement, list[tuple[Any, ...]], list[str]]:
    """Insert ``items`` (routed) into ``queue``: yields statements, receives each
    one's rows, returns the ids in input order (a held dedup key: its item's id)."""
    plan = InsertPlan.of(items)
    ids: list[str | None] = [None] * len(items)
    notify = True
    for partition, pending in sorted(plan.by_partition.items()):
        table = names.partition(queue.queue_id, partition)
        params = insert_params(queue, [items[i] for i in pending])
        params["payload"] = [bytes(items[i].payload) for i in pending]
        params.update(now=now, channel=names.channel, queue=queue.name, notify=notify)
        notify = False
        rows = yield stmt.INSERT_ITEMS.format(table=table), params
        inserted = sorted((row for row in rows if row[0] >= 0), key=lambda row: int(row[0]))
        new_keys = {row[1] for row in inserted if row[1] is not None}
        placed = [
            i for i in pending if items[i].dedup_key is None or items[i].dedup_key in new_keys
        ]
        for index, row in zip(placed, inserted, strict=True):
            ids[index] = format_id(queue.queue_id, partition, int(row[0]))
        held = {items[i].dedup_key: i for i in pending if ids[i] is None}
        if held:
            keys = text_array(key for key in held if key is not None)
            found = yield stmt.SELECT_DEDUP.format(table=table), {"keys": keys}
            for seq, key in found:
                ids[held[key]] = format_id(queue.queue_id, partition, int(seq))
            if any(ids[i] is None for i in pending):
                raise Unavailable("a dedup key changed hands during produce; try again")
    return plan.ids_in_order(ids)
