"""Placement on a Citus cluster: each store's schema is a distributed schema
held whole by one worker node, and two stores on two nodes take items at the
same time through the one coordinator.

The flow here is produce and read back: the items are counted through the
coordinator and on the worker that holds them (tests/citus/test_namespaces.py
leases and completes in two namespaces at once).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from conformance.helpers import items, make_queue
from pg_schemas import drop_schema

from querator import Querator

from .cluster import CitusCluster

ITEMS = 200
"""Items each store's producer sends."""


@pytest.fixture
def two_schemas(citus: CitusCluster) -> Iterator[tuple[str, str]]:
    """Two fresh schema names, dropped after the test."""
    names = (f"c_{secrets.token_hex(6)}", f"c_{secrets.token_hex(6)}")
    yield names
    for name in names:
        drop_schema(citus.dsn, name)


def place_apart(citus: CitusCluster, first: str, second: str) -> tuple[int, int]:
    """The worker ports of the two schemas, after moving the second to the other
    worker when Citus placed both on one node (it picks a node per schema)."""
    port_a, port_b = citus.node_of(first), citus.node_of(second)
    if port_a == port_b:
        other = next(w.port for w in citus.workers if w.port != port_a)
        citus.coordinator.execute(
            "SELECT citus_schema_move(%s::regnamespace, '127.0.0.1', %s, 'block_writes')",
            (second, other),
        )
        port_b = citus.node_of(second)
    return port_a, port_b


def shard_tables(citus: CitusCluster, schema: str) -> set[tuple[str, int]]:
    """Every (table, worker port) of ``schema`` as ``citus_shards`` lists them."""
    rows = citus.coordinator.execute(
        "SELECT table_name::text, nodeport FROM citus_shards"
        " WHERE citus_table_type = 'schema' AND table_name::text LIKE %s",
        (f"{schema}.%",),
    )
    return {(str(table), int(str(port))) for table, port in rows}


def flow(url: str, queue: str) -> int:
    """Produce ``ITEMS`` items into ``queue`` of the store at ``url`` in batches;
    how many the store then holds."""
    with Querator(url) as q:
        make_queue(q, queue, partitions=2)
        for start in range(0, ITEMS, 50):
            q.produce(queue, items(*(b"%d" % n for n in range(start, start + 50))))
        return q.stats(queue).total


def rows_on_worker(citus: CitusCluster, port: int, schema: str) -> int:
    """The item rows of ``schema``'s queue 1 counted on the worker at ``port``
    itself (its shard tables are named ``<table>_<shard id>``)."""
    worker = next(w for w in citus.workers if w.port == port)
    tables = worker.execute(
        "SELECT format('%%I.%%I', schemaname, tablename) FROM pg_tables"
        " WHERE schemaname = %s AND tablename LIKE 'q1\\_p%%'",
        (schema,),
    )
    return sum(
        int(str(worker.execute(f"SELECT count(*) FROM {table}")[0][0])) for (table,) in tables
    )


def test_a_store_lives_whole_on_one_worker_and_two_run_at_once(
    citus: CitusCluster, two_schemas: tuple[str, str]
) -> None:
    first, second = two_schemas
    for schema in two_schemas:  # the backend creates its schema and tables on open
        with Querator(citus.url(schema)):
            pass
    port_a, port_b = place_apart(citus, first, second)
    assert port_a != port_b
    assert {port_a, port_b} == {w.port for w in citus.workers}
    schemas = citus.coordinator.execute("SELECT schema_name::text FROM citus_schemas")
    assert {(first,), (second,)} <= set(schemas)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(flow, citus.url(schema), "work") for schema in two_schemas]
        totals = [run.result(timeout=120) for run in runs]

    assert totals == [ITEMS, ITEMS]
    for schema, port in ((first, port_a), (second, port_b)):
        tables = shard_tables(citus, schema)
        assert {f"{schema}.queues", f"{schema}.q1_p0", f"{schema}.q1_p1"} <= {t for t, _ in tables}
        assert {p for _, p in tables} == {port}, f"{schema} is spread over {tables}"
        assert rows_on_worker(citus, port, schema) == ITEMS


def test_the_session_audit_counts_a_statement_over_several_nodes(citus: CitusCluster) -> None:
    """The suite's placement audit (the ``citus`` fixture's teardown reads
    :meth:`CitusCluster.session_executions`) sees a statement over every shard of
    a hash-distributed table, and one inside a single schema as single-shard."""
    table = f"public.probe_{secrets.token_hex(4)}"
    citus.coordinator.execute(f"CREATE TABLE {table} (id integer)")
    try:
        citus.coordinator.execute("SELECT create_distributed_table(%s, 'id')", (table,))
        single, multi = citus.session_executions()
        citus.coordinator.execute(f"SELECT count(*) FROM {table}")
        after_single, after_multi = citus.session_executions()
        assert (after_single - single, after_multi - multi) == (0, 1)
    finally:
        # this test's own statement is excused from the session's audit, no other
        citus.counted = (citus.counted[0], citus.counted[1] - 1)
        citus.coordinator.execute(f"DROP TABLE {table}")
