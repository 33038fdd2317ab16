"""The parts :mod:`.fused` assembles into one-statement transactions: one
statement of data-modifying CTEs per group of plans, beside the statement it
builds from them (every other statement of the backend is in :mod:`.statements`).

They are ``str.format`` templates: ``{n}`` (``{k}``) numbers the part, and the
psycopg fields left for later are doubled (``{{d{n}}}``: delete n's table). Their
item columns are built from :data:`.schema.ITEM_TABLE`, as the statements'.
"""

from __future__ import annotations

from typing import Final

from querator.queue.backends.postgres.schema import (
    GIVEN,
    ITEM_POSITION,
    ITEM_TABLE,
    given_arrays,
    insert_list,
    item_row,
    item_select,
)
from querator.queue.backends.postgres.statements import NOW, produced, produced_leased

FUSED_DELETE: Final = (
    """
d{n} AS (
    DELETE FROM {{d{n}}} AS t
    USING unnest(%(d{n}_seqs)s::bigint[], %(d{n}_versions)s::integer[]) AS w(seq, version)
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > """
    + NOW
    + """
    RETURNING t.seq
)"""
)
"""Completes held items of one table whose (seq, version) match, as
:data:`.statements.COMPLETE_CHECKED` does; :data:`FUSED_OK` checks the count."""

FUSED_DELETED: Final = "(SELECT count(*) FROM d{n}) = %(d{n}_count)s::bigint"
"""True when delete ``n`` found every item it was given."""

FUSED_DEPEND: Final = """
c{n} AS (
    UPDATE {{c{n}}} AS t SET version = t.version
    FROM unnest(%(c{n}_seqs)s::bigint[], %(c{n}_versions)s::integer[]) AS w(seq, version)
    WHERE t.seq = w.seq AND t.version = w.version
    RETURNING t.seq
)"""
"""Locks the ``depends`` items of one table that still hold the versions named
(a row changed meanwhile is read again and drops out), changing nothing;
:data:`FUSED_DEPENDED` checks the count. An ``UPDATE`` rather than ``SELECT …
FOR UPDATE``: Citus routes a data-modifying CTE with the statement, where it
plans a locking ``SELECT`` apart (and then misreads its binary parameters)."""

FUSED_DEPENDED: Final = "(SELECT count(*) FROM c{n}) = %(c{n}_count)s::bigint"
"""True when check ``n`` found every item it was given at its version."""

FUSED_OK: Final = (
    "\nok AS (SELECT CASE WHEN {deleted} THEN 1 ELSE {{schema}}.check_failed() END AS ok)"
)
"""One row, or ``check_failed()`` when a delete or a check came short
(``{deleted}``: every :data:`FUSED_DELETED` and :data:`FUSED_DEPENDED` joined by
AND). Every insert reads it, so none runs first."""

FUSED_OK_UNCHECKED: Final = "\nok AS (SELECT 1::bigint AS ok)"
""":data:`FUSED_OK` of a statement that completes and checks nothing."""

_FUSED_ARRAYS, _FUSED_NAMES = given_arrays("i{n}_")
_FUSED_PRODUCED = insert_list(produced("i{n}_"))
_CLIENT_ARRAY = ITEM_TABLE[ITEM_POSITION["client_id"]]._replace(given_as="text")
_FUSED_LEASED_ARRAYS, _FUSED_LEASED_NAMES = given_arrays("i{n}_", (*GIVEN, _CLIENT_ARRAY))
_FUSED_LEASED = insert_list(produced_leased("i{n}_", "v.client_id"))

FUSED_INSERT: Final = (
    """
i{n} AS (
    INSERT INTO {{i{n}}} ("""
    + _FUSED_PRODUCED[0]
    + ")\n    SELECT "
    + _FUSED_PRODUCED[1]
    + "\n    FROM unnest("
    + _FUSED_ARRAYS
    + ") WITH ORDINALITY AS v("
    + _FUSED_NAMES
    + """, ord)
    CROSS JOIN ok
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING seq, dedup_key
)"""
)
"""Insert ``n``: items produced into one table, as :data:`.statements.INSERT_ITEMS` does."""

FUSED_INSERT_LEASED: Final = (
    """
i{n} AS (
    INSERT INTO {{i{n}}} AS t ("""
    + _FUSED_LEASED[0]
    + ")\n    SELECT "
    + _FUSED_LEASED[1]
    + "\n    FROM unnest("
    + _FUSED_LEASED_ARRAYS
    + ") WITH ORDINALITY AS v("
    + _FUSED_LEASED_NAMES
    + """, ord)
    CROSS JOIN ok
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING {{columns}}
)"""
)
"""Insert ``n``: claimed items, each due now leased to its plan's client, as
:data:`.statements.INSERT_LEASED` does; returns the inserted rows whole."""

FUSED_HITS: Final = """
h{n} AS (
    SELECT t.seq, t.dedup_key FROM {{i{n}}} AS t
    WHERE t.dedup_key = ANY(%(i{n}_keys)s::text[])
      AND t.dedup_key NOT IN (SELECT dedup_key FROM i{n} WHERE dedup_key IS NOT NULL)
)"""
"""The items that already held dedup keys insert ``n`` skipped."""

FUSED_INSERTED: Final = "(SELECT count(*) FROM i{n})"
"""How many rows insert ``n`` added."""

FUSED_HIT: Final = " + (SELECT count(*) FROM h{n})"
"""Added to :data:`FUSED_INSERTED` when insert ``n`` has dedup keys."""

FUSED_EXPLAINED: Final = " = %(i{n}_count)s::bigint"
"""Ends insert ``n``'s check: added and hit rows account for every item given."""

FUSED_DONE: Final = "CASE WHEN {explained} THEN 0 ELSE {{schema}}.check_failed() END"
"""0, or ``check_failed()`` when an insert came short of what it explains (a key
taken by a transaction that committed after the statement began)."""

FUSED_WOKEN: Final = (
    "\nwoken AS (SELECT pg_notify(%(channel)s, w)::text FROM unnest(%(notify)s::text[]) AS w)"
)
"""Wakes the produced queues' listeners (at commit)."""

FUSED_LEASED_ROWS: Final = "SELECT {n}, l.* FROM i{n} AS l"
"""The rows of leased insert ``n``, tagged ``n``."""

FUSED_LOOKUP: Final = (
    "SELECT {tag} - ({k} * {partitions} + l.part), "
    + item_select("l")
    + " FROM {{schema}}.lookup_keys(%(k{k}_tables)s::text[]::regclass[], %(k{k}_keys)s::text[],"
    " {after}) AS l"
)
"""The items of lookup ``k``, after the statement's changes (``{after}`` reads them
first), each tagged with its lookup and partition."""


def fused_row(tag: str, seq: str, dedup_key: str, source: str | None, typed: bool) -> str:
    """An output row of the fused statement shaped like a leased one, carrying
    only ``seq`` and ``dedup_key`` (typed NULLs elsewhere for the UNION's first)."""
    row = f"SELECT {tag}, " + item_row({"seq": seq, "dedup_key": dedup_key}, typed)
    return row if source is None else f"{row} FROM {source}"
