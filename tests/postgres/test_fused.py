"""One-statement transactions (``postgres/fused.py``): which plans take that path,
what happens when a dedup key changes hands while the statement runs, and how
a ``depends`` item that changes meanwhile fails the statement."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from pg_schemas import waiting_on_a_lock
from polling import wait_for

from querator import Item, Querator
from querator.errors import Conflict, ConflictReason
from querator.queue.backends.base import ItemKey, NewItem, RetryOp, TxnPlan
from querator.queue.backends.postgres.fused import fusable
from querator.queue.models import QueueInfo, QueueSettings, Ref, TransactResult


def _info(name: str, queue_id: int, partitions: int = 1) -> QueueInfo:
    settings = QueueSettings(partitions=partitions)
    return QueueInfo.model_construct(name=name, queue_id=queue_id, settings=settings)


def test_a_step_commit_is_fusable_and_retries_are_not() -> None:
    queues = {"work": _info("work", 1), "results": _info("results", 2)}
    done = ItemKey("work", "1.0.7", 1, 0, 7, 3)
    step_commit = TxnPlan(
        queues,
        complete=[done],
        produce=[("results", [NewItem(0, b"record", dedup_key="run/1")])],
        claim=[("work", [NewItem(0, b"next step", dedup_key="run/2")])],
        client_id="w1",
    )
    assert fusable(step_commit)
    assert fusable(TxnPlan(queues, produce=[("results", [NewItem(0, b"meta")])]))
    fenced_record = TxnPlan(
        queues, depends=[done], produce=[("results", [NewItem(0, b"read", dedup_key="run/0")])]
    )
    assert fusable(fenced_record)
    stale_queue = ItemKey("work", "9.0.7", 9, 0, 7, 3)
    assert not fusable(replace(fenced_record, depends=[stale_queue]))
    retried = TxnPlan(queues, retry=[RetryOp(done, None)])
    assert not fusable(retried)
    two_inserts_into_one_table = TxnPlan(
        queues, produce=[("work", [NewItem(0, b"a")])], claim=[("work", [NewItem(0, b"b")])]
    )
    assert not fusable(two_inserts_into_one_table)
    wrong_queue_id = TxnPlan(queues, complete=[ItemKey("work", "9.0.7", 9, 0, 7, 3)])
    assert not fusable(wrong_queue_id)


def test_a_dedup_key_committed_mid_statement_returns_its_holder(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    with Querator(pg_schema_url) as q:
        q.create_queue("src")
        info = q.create_queue("race")
        q.produce("src", [Item(payload=b"step")])
        (leased,) = q.lease("src", client_id="c1")
        table = f'"{pg_schema}"."q{info.queue_id}_p0"'
        with psycopg.connect(pg_dsn) as other:  # a transaction that holds key "k" uncommitted
            seq = _insert_item(other, table, b"theirs", "k")
            thread, results = _transact_in_thread(
                q, complete=[leased], produce={"race": [Item(payload=b"mine", dedup_key="k")]}
            )
            # our statement waits for the other transaction's insert of "k" ...
            wait_for(lambda: waiting_on_a_lock(pg_dsn, f"q{info.queue_id}_p0"), timeout=10)
            other.commit()  # ... which commits after our statement's snapshot
            thread.join(timeout=30)
        (result,) = results
        assert result.produced["race"] == [f"{info.queue_id}.0.{seq}"]
        assert [s.payload for s in q.list_items("race")] == [b"theirs"]
        assert q.stats("src").total == 0


def test_a_lookup_sees_what_committed_while_the_statement_waited(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    with Querator(pg_schema_url) as q:
        src = q.create_queue("src")
        records = q.create_queue("records")
        q.produce("src", [Item(payload=b"step")])
        (leased,) = q.lease("src", client_id="c1")
        with psycopg.connect(pg_dsn) as other:
            # another transaction locks our item and stores a record ...
            other.execute(f'SELECT 1 FROM "{pg_schema}"."q{src.queue_id}_p0" FOR UPDATE')
            _insert_item(other, f'"{pg_schema}"."q{records.queue_id}_p0"', b"record", "step-1")
            thread, results = _transact_in_thread(
                q,
                complete=[leased],
                produce={"records": [Item(payload=b"mine", dedup_key="step-0")]},
                lookup={"records": ["step-1"]},
            )
            wait_for(lambda: waiting_on_a_lock(pg_dsn, f"q{src.queue_id}_p0"), timeout=10)
            other.commit()  # ... and commits after our statement began
            thread.join(timeout=30)
        (result,) = results
        assert result.found["records"]["step-1"].payload == b"record"


def test_a_fenced_write_commits_and_keeps_the_item(pg_schema_url: str) -> None:
    with Querator(pg_schema_url) as q:
        q.create_queue("src")
        q.create_queue("records")
        q.produce("src", [Item(payload=b"wake")])
        (leased,) = q.lease("src", client_id="c1")
        result = q.call(
            q.aio.commit,
            depends=[leased],
            produce={"records": [Item(payload=b"read", dedup_key="run/0")]},
            lookup={"records": ["run/0"]},
        )
        assert result.found["records"]["run/0"].payload == b"read"
        (held,) = q.list_items("src")
        assert (held.id, held.version, held.client_id) == (leased.id, leased.version, "c1")
        with pytest.raises(Conflict) as failed:  # a version the item no longer holds
            q.call(
                q.aio.commit,
                depends=[Ref("src", leased.id, leased.version - 1)],
                produce={"records": [Item(payload=b"late", dedup_key="run/1")]},
            )
        assert failed.value.reasons == {leased.id: ConflictReason.STALE}
        assert [i.payload for i in q.list_items("records")] == [b"read"]


def test_a_fenced_write_fails_when_its_item_changes_while_it_waits(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    with Querator(pg_schema_url) as q:
        src = q.create_queue("src")
        q.create_queue("records")
        q.produce("src", [Item(payload=b"wake")])
        (leased,) = q.lease("src", client_id="c1")
        with psycopg.connect(pg_dsn) as other:  # another worker leases it again, uncommitted
            table = f'"{pg_schema}"."q{src.queue_id}_p0"'
            other.execute(f"UPDATE {table} SET version = version + 1, client_id = 'c2'")
            thread, results, errors = _commit_in_thread(
                q,
                depends=[leased],
                produce={"records": [Item(payload=b"read", dedup_key="run/0")]},
            )
            wait_for(lambda: waiting_on_a_lock(pg_dsn, f"q{src.queue_id}_p0"), timeout=10)
            other.commit()
            thread.join(timeout=30)
        assert results == []
        assert isinstance(errors[0], Conflict)
        assert errors[0].reasons == {leased.id: ConflictReason.STALE}
        assert q.list_items("records") == []


def _commit_in_thread(
    q: Querator, **kwargs: Any
) -> tuple[threading.Thread, list[TransactResult], list[BaseException]]:
    """``commit(**kwargs)`` started in a thread; its result or its error lands in a list."""
    results: list[TransactResult] = []
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            results.append(q.call(q.aio.commit, **kwargs))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=commit)
    thread.start()
    return thread, results, errors


def _insert_item(conn: psycopg.Connection[Any], table: str, payload: bytes, key: str) -> int:
    """Insert an item with dedup key ``key`` in ``conn``'s open transaction; its seq."""
    row = conn.execute(
        f"INSERT INTO {table} (version, available_at, attempts, expire_at, payload, kind,"
        " encoding, reference, headers, dedup_key) VALUES (1, now(), 0,"
        " now() + interval '1 hour', %s, '', '', '', '{}', %s) RETURNING seq",
        (payload, key),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _transact_in_thread(
    q: Querator, **kwargs: Any
) -> tuple[threading.Thread, list[TransactResult]]:
    """``commit(**kwargs)`` (transact with the engine's knobs) started in a thread;
    its result lands in the list."""
    results: list[TransactResult] = []
    thread = threading.Thread(target=lambda: results.append(q.call(q.aio.commit, **kwargs)))
    thread.start()
    return thread, results
