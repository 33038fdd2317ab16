"""The PostgreSQL backend's sessions and wakeups on a Citus coordinator."""

from __future__ import annotations

import anyio
import psycopg
from conformance.helpers import items, make_queue

from querator import Querator
from querator.queue.backends.postgres.backend import PostgresBackend
from querator.queue.backends.postgres.schema import Names

from .cluster import CitusCluster


def test_sessions_leave_plans_to_citus(citus: CitusCluster, citus_schema: str) -> None:
    """Citus cannot route a generic plan whose bound values it must see: on the
    coordinator the pool keeps PostgreSQL's plan choice (plain PostgreSQL forces
    generic plans: tests/postgres/test_catalog.py)."""
    backend = PostgresBackend(citus.url(citus_schema))

    async def plan_cache_mode() -> str:
        await backend.open()
        try:
            async with backend._connect() as conn:
                row = await (
                    await conn.execute("SELECT current_setting('plan_cache_mode')")
                ).fetchone()
                assert row is not None
                return str(row[0])
        finally:
            await backend.close()

    assert anyio.run(plan_cache_mode) == "auto"


def test_a_produce_routed_to_a_worker_wakes_a_listener_on_the_coordinator(
    citus: CitusCluster, citus_schema: str
) -> None:
    """The notification of a produce is computed on the coordinator (a CTE of the
    routed insert), so a session listening there hears it."""
    channel = Names(citus_schema).channel
    with (
        Querator(citus.url(citus_schema)) as q,
        psycopg.connect(citus.dsn, autocommit=True) as listener,
    ):
        make_queue(q, "wake")
        listener.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
        q.produce("wake", items(b"x"))
        heard = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
    assert heard == ["wake"]
