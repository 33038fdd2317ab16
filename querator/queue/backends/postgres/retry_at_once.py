"""Retrying held items now in one statement, when nothing needs deciding.

A plan that only retries items of one partition table, all to one instant
(now, or a ``retry_at``: a deferral), in a queue whose items never
dead-letter by attempts (``max_attempts`` 0), needs no locking
transaction: one ``UPDATE`` checks every version and lease and changes all or
nothing (``check_failed()`` undoes it otherwise, and the locking path names
the reasons). It also wakes the plan's names and, for a plan that is not
``durable``, commits without waiting for the flush: one round trip where the
locking path takes five (a semaphore's release). The statement is built sans
I/O (:func:`retry_call`): the sync shell, :mod:`.sync_calls`, runs it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from querator.queue.backends.base import TableRefs, TxnPlan
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array, text_array
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.transact import (
    addresses_plan_queue,
    in_seq_order,
    run_self_checked,
    table_refs,
)


def one_table_retry(plan: TxnPlan) -> bool:
    """True when ``plan`` only retries held items of one partition table of a
    queue without an attempts limit, none dead, all to one instant."""
    if not plan.retry or plan.complete or plan.renew or plan.depends or plan.delete:
        return False
    if plan.produce or plan.claim or plan.lookup:
        return False
    first = plan.retry[0]
    info = plan.queues.get(first.key.queue)
    if info is None or info.settings.max_attempts != 0:
        return False
    return all(
        op.retry_at == first.retry_at
        and not op.dead
        and op.key.queue == first.key.queue
        and op.key.partition == first.key.partition
        and addresses_plan_queue(op.key, plan)
        for op in plan.retry
    )


def retry_call(
    names: stmt.Names,
    refs: TableRefs,
    retry_at: datetime | None,
    woken: Iterable[str],
    durable: bool,
    now: datetime | None,
) -> tuple[bytes, dict[str, Any]]:
    """The statement and parameters that retry held items of one table at their
    versions to ``retry_at`` (None: now) and wake ``woken`` at commit; a failed
    check raises an error :func:`.transact.failed_check` recognizes."""
    seqs, versions = in_seq_order(refs)
    args = {
        "seqs": int_array(seqs),
        "versions": int_array(versions),
        "ats": [retry_at] * len(seqs),
        "count": len(seqs),
        "now": now,
        "durable": durable,
        "channel": names.channel,
        "notify": text_array(sorted(woken)),
    }
    return stmt.retry_for(names, refs.queue_id, refs.partition), args


async def retry_at_once(conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None) -> bool:
    """Run a :func:`one_table_retry` plan as one autocommit statement. False when
    some check failed: then nothing changed."""
    refs = table_refs([op.key for op in plan.retry])
    woken = ({refs.queue} - plan.silent) | plan.wake
    statement, args = retry_call(names, refs, plan.retry[0].retry_at, woken, plan.durable, now)
    return await run_self_checked(conn, refs.queue, statement, args) is not None
