"""Retrying held items now in one statement, when nothing needs deciding.

A plan that only retries items of one partition table, now, in a queue whose
items never dead-letter by attempts (``max_attempts`` 0), needs no locking
transaction: one ``UPDATE`` checks every version and lease and changes all or
nothing (``check_failed()`` undoes it otherwise, and the locking path names
the reasons). It also wakes the plan's names and, for a plan that is not
``durable``, commits without waiting for the flush: one round trip where the
locking path takes five (a semaphore's release).
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from querator.queue.backends.base import TxnPlan
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array, text_array
from querator.queue.backends.postgres.failures import driver_errors
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.transact import DEADLOCK_STATE, addresses_plan_queue


def one_table_retry(plan: TxnPlan) -> bool:
    """True when ``plan`` only retries, now, held items of one partition table of
    a queue without an attempts limit."""
    if not plan.retry or plan.complete or plan.renew or plan.depends or plan.delete:
        return False
    if plan.produce or plan.claim or plan.lookup:
        return False
    first = plan.retry[0].key
    info = plan.queues.get(first.queue)
    if info is None or info.settings.max_attempts != 0:
        return False
    return all(
        op.retry_at is None
        and not op.dead
        and op.key.queue == first.queue
        and op.key.partition == first.partition
        and addresses_plan_queue(op.key, plan)
        for op in plan.retry
    )


async def retry_at_once(conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None) -> bool:
    """Run a :func:`one_table_retry` plan as one autocommit statement. False when
    some check failed: then nothing changed."""
    keys = sorted((op.key for op in plan.retry), key=lambda key: key.seq)
    first = keys[0]
    woken = ({first.queue} - plan.silent) | plan.wake
    args = {
        "seqs": int_array(key.seq for key in keys),
        "versions": int_array(key.version for key in keys),
        "ats": [None] * len(keys),
        "count": len(keys),
        "now": now,
        "durable": plan.durable,
        "channel": names.channel,
        "notify": text_array(sorted(woken)),
    }
    with driver_errors(first.queue):
        try:
            await conn.execute(stmt.retry_for(names, first.queue_id, first.partition), args)
        except psycopg.Error as exc:
            if exc.sqlstate in (stmt.CHECK_FAILED_STATE, DEADLOCK_STATE):
                return False
            raise
    return True
