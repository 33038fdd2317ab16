"""Producing on a SQLite connection the application owns, inside its open
transaction (the same database file as querator's store).

The statements are the ones :func:`~.items.produce_items` runs, written sans
I/O as the PostgreSQL backend's (:mod:`querator.queue.foreign` drives them):
first a look at which file the connection has open (refused unless it is the
store's), then per partition the dedup lookup and one ``INSERT … RETURNING seq``
per fresh item. The items exist exactly when the application's transaction
commits; :mod:`.commit_wake` wakes the waiting workers once it has.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from typing import Any

from querator.errors import InvalidArgument
from querator.queue.backends.base import InsertPlan, NewItem
from querator.queue.backends.sqlite import statements as stmt
from querator.queue.backends.sqlite.rows import item_values
from querator.queue.ids import format_id
from querator.queue.models import QueueInfo

__all__ = ["DATABASE_LIST", "produce_steps"]

DATABASE_LIST = "PRAGMA database_list"
"""Which files a connection has open: rows ``(seq, name, file)``."""

Steps = Generator[tuple[str, tuple[Any, ...]], list[tuple[Any, ...]], list[str]]


def produce_steps(path: str, queue: QueueInfo, items: Sequence[NewItem], now: int) -> Steps:
    """Insert ``items`` (routed) into ``queue`` of the store at ``path``, at
    instant ``now`` (µs): yields statements, receives each one's rows, returns
    the ids in input order (a held dedup key: its item's id)."""
    files = yield DATABASE_LIST, ()
    main = next((str(row[2]) for row in files if row[1] == "main"), "")
    if not main or os.path.realpath(main) != os.path.realpath(path):
        raise InvalidArgument(
            "connection", f"is open on {main or 'no file'!r}, not on the store's file {path!r}"
        )
    plan = InsertPlan.of(items)
    ids: list[str | None] = [None] * len(items)
    qid, expire = queue.queue_id, queue.settings.expire_timeout
    for partition, pending in sorted(plan.by_partition.items()):
        keyed = {items[i].dedup_key: i for i in pending if items[i].dedup_key is not None}
        if keyed:
            held = yield stmt.seqs_by_dedup(qid, partition, len(keyed)), tuple(keyed)
            for seq, key in held:
                ids[keyed[key]] = format_id(qid, partition, int(seq))
        insert = stmt.insert_item(qid, partition) + " RETURNING seq"
        for index in [i for i in pending if ids[i] is None]:
            [(seq,)] = yield insert, item_values(items[index], now, expire)
            ids[index] = format_id(qid, partition, int(seq))
    return plan.ids_in_order(ids)
