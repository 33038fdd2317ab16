"""Namespaces on Citus: each namespace of a store is a distributed schema held
whole by one worker; two namespaces on two workers lease and complete at the
same time through the one coordinator, every statement routed whole to one
node and no transaction committed on two (Citus's stat counters and its
two-phase commit records), and never see each other's items; the coordinator
lists and deletes them (tests/citus/test_under_load.py moves one under load)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from conformance.helpers import items, make_queue
from pg_schemas import drop_schema

from querator import Querator
from querator.queue.backends.namespace_admin import delete_namespace, list_namespaces
from querator.queue.backends.namespaces import with_namespace

from .cluster import CitusCluster
from .test_placement import place_apart, shard_tables

NAMESPACES = ("acme", "globex")
ITEMS = 100
"""Items each namespace's producer sends."""


@pytest.fixture
def store(citus: CitusCluster) -> Iterator[str]:
    """The base schema of a fresh store on the coordinator; it and its
    namespaces' schemas are dropped after the test."""
    base = f"c_{secrets.token_hex(6)}"
    yield base
    for schema in (base, *(f"{base}__{namespace}" for namespace in NAMESPACES)):
        drop_schema(citus.dsn, schema)


def work(url: str, namespace: str) -> list[bytes]:
    """Produce ``ITEMS`` items tagged with ``namespace`` into its queue, then lease
    and complete them all; the payloads it leased."""
    seen: list[bytes] = []
    with Querator(url, namespace=namespace) as q:
        for start in range(0, ITEMS, 25):
            q.produce(
                "work", items(*(f"{namespace}-{n}".encode() for n in range(start, start + 25)))
            )
        while len(seen) < ITEMS:
            leased = q.lease("work", client_id=namespace, batch_size=20, timeout=5)
            q.complete("work", leased)
            seen.extend(item.payload for item in leased)
        assert q.stats("work").total == 0
    return seen


def test_namespaces_live_on_two_workers_and_never_meet(citus: CitusCluster, store: str) -> None:
    url = citus.url(store)
    for namespace in NAMESPACES:
        with Querator(url, namespace=namespace) as q:
            make_queue(q, "work", partitions=2)
    schemas = [f"{store}__{namespace}" for namespace in NAMESPACES]
    port_a, port_b = place_apart(citus, *schemas)
    assert {port_a, port_b} == {w.port for w in citus.workers}
    for schema, port in zip(schemas, (port_a, port_b), strict=True):
        assert {p for _, p in shard_tables(citus, schema)} == {port}

    citus.reset_executions()
    before = citus.two_phase_commits()
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(work, url, namespace) for namespace in NAMESPACES]
        seen = [run.result(timeout=300) for run in runs]
    # the placement audit: every statement went whole to one node, and every
    # transaction Citus committed in two phases (a produce is: an INSERT ...
    # SELECT the coordinator feeds) prepared on one node only
    single, multi = citus.executions()
    assert (single > 0, multi) == (True, 0)
    during = {gid: groups for gid, groups in citus.two_phase_commits().items() if gid not in before}
    assert during, "the produces left no two-phase records to audit"
    assert all(len(groups) == 1 for groups in during.values()), during

    for namespace, payloads in zip(NAMESPACES, seen, strict=True):
        assert sorted(payloads) == sorted(f"{namespace}-{n}".encode() for n in range(ITEMS))
    assert list_namespaces(url) == list(NAMESPACES)

    delete_namespace(url, "globex")
    assert list_namespaces(url) == ["acme"]
    remaining = {
        str(row[0])
        for row in citus.coordinator.execute("SELECT schema_name::text FROM citus_schemas")
    }
    assert schemas[0] in remaining and schemas[1] not in remaining
    with Querator(with_namespace(url, "acme")) as acme:
        assert [info.name for info in acme.list_queues()] == ["work"]
