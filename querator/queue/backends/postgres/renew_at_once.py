"""Renewing held items in one statement, when they all live in one table.

A plan that only renews items of one partition table needs no locking
transaction: one ``UPDATE`` (:data:`~.statements.RENEW_CHECKED`) checks every
version and lease and changes all or nothing (``check_failed()`` undoes it
otherwise, and the locking path names the reasons), returning the renewed
rows. One round trip where the locking path takes four. The statement is
built sans I/O (:func:`renew_call`): the sync shell, :mod:`.sync_calls`, runs
it too, and maps the rows with :func:`renewed_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from querator.queue.backends.base import TableRefs, TxnPlan
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.transact import (
    addresses_plan_queue,
    in_seq_order,
    run_self_checked,
    table_refs,
)
from querator.queue.ids import id_prefix
from querator.queue.models import Leased, QueueInfo


def one_table_renew(plan: TxnPlan) -> bool:
    """True when ``plan`` only renews held items of one partition table, all by
    the same extension."""
    if not plan.renew or plan.complete or plan.retry or plan.depends or plan.delete:
        return False
    if plan.produce or plan.claim or plan.lookup or plan.wake or not plan.durable:
        return False
    first = plan.renew[0]
    return all(
        op.extend == first.extend
        and op.key.queue == first.key.queue
        and op.key.partition == first.key.partition
        and addresses_plan_queue(op.key, plan)
        for op in plan.renew
    )


def renew_call(
    names: stmt.Names, refs: TableRefs, extend: float, now: datetime | None
) -> tuple[bytes, dict[str, Any]]:
    """The statement and parameters that extend the leases of held items of one
    table at their versions to now + ``extend`` seconds, returning the renewed
    rows; a failed check raises an error :func:`.transact.failed_check` recognizes."""
    seqs, versions = in_seq_order(refs)
    args = {
        "seqs": int_array(seqs),
        "versions": int_array(versions),
        "extend": [float(extend)] * len(seqs),
        "count": len(seqs),
        "now": now,
    }
    return stmt.renew_for(names, refs.queue_id, refs.partition), args


def renewed_rows(queue: QueueInfo, refs: TableRefs, found: Sequence[Any]) -> list[Leased]:
    """The rows :func:`renew_call`'s statement returned, as leased records in the
    order ``refs`` names them."""
    by_id: dict[str, Leased] = {}
    for row in found:
        record = rows.item(Leased, queue, refs.partition, row)
        by_id[record.id] = record
    prefix = id_prefix(refs.queue_id, refs.partition)
    return [by_id[prefix + str(seq)] for seq in refs.seqs]


async def renew_at_once(
    conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None
) -> list[Leased] | None:
    """Run a :func:`one_table_renew` plan as one autocommit statement: the renewed
    items in the plan's order, or None when some check failed (nothing changed)."""
    refs = table_refs([op.key for op in plan.renew])
    statement, args = renew_call(names, refs, plan.renew[0].extend, now)
    found = await run_self_checked(conn, refs.queue, statement, args, fetch=True)
    return None if found is None else renewed_rows(plan.queues[refs.queue], refs, found)
