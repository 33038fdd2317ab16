"""The wakeup listener starts when a client first waits, not before."""

from __future__ import annotations

import threading

import anyio
import psycopg
import pytest
from polling import wait_for

from querator import AsyncQuerator, Item, Querator
from querator.errors import RequestTimeout


def listening_sessions(dsn: str, schema: str) -> int:
    """Sessions whose last statement was a LISTEN on ``schema``'s channel."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE %s",
            (f'LISTEN "querator_{schema}%',),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_producer_holds_no_listener_and_a_waiter_gets_one(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    with Querator(pg_schema_url) as q:
        q.create_queue("lazy")
        q.produce("lazy", [Item(payload=b"x")])
        q.lease("lazy", client_id="c")  # an item was there: no wait
        assert listening_sessions(pg_dsn, pg_schema) == 0
        with pytest.raises(RequestTimeout):
            q.lease("lazy", client_id="c", timeout=0.3)
        wait_for(lambda: listening_sessions(pg_dsn, pg_schema) == 1, timeout=10)


@pytest.mark.anyio
async def test_a_wakeup_sent_before_the_listener_is_up_is_not_lost(
    pg_schema_url: str, anyio_backend: str
) -> None:
    """A watch taken before the look, with the produce landing before the new
    listener's LISTEN: the listener's start wakes the watch, so the watcher
    looks again instead of sleeping through the item."""
    producer = await anyio.to_thread.run_sync(Querator, pg_schema_url)
    try:
        await anyio.to_thread.run_sync(producer.create_queue, "lazy3")
        async with AsyncQuerator(pg_schema_url) as consumer:
            watch = consumer.watch("lazy3")  # starts the listener task (not run yet)
            assert (await consumer.stats("lazy3")).total == 0  # the look: nothing yet
            # Produce while this event loop is blocked: the item and its NOTIFY are
            # committed before the listener task can run its LISTEN.
            blocker = threading.Thread(
                target=producer.produce, args=("lazy3", [Item(payload=b"x")])
            )
            blocker.start()
            blocker.join()
            assert await watch.wait(5.0), "the watch slept through a produced item"
            [item] = await consumer.lease("lazy3", client_id="c")
            assert item.payload == b"x"
    finally:
        await anyio.to_thread.run_sync(producer.close)
