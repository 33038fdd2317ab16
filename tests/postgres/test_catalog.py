"""PostgreSQL specifics: the schema parameter, table naming, unreachable servers."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import anyio
import psycopg
import pytest
from pg_schemas import drop_schema, with_query

from querator import Item, Querator, QueueSettings
from querator.errors import InvalidArgument, QueratorError, Unavailable
from querator.queue.backends.postgres.backend import PostgresBackend


@pytest.fixture
def client(pg_schema_url: str) -> Iterator[Querator]:
    with Querator(pg_schema_url) as q:
        yield q


def relations(dsn: str, schema: str) -> list[str]:
    """Names of the tables in ``schema``."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_tables_live_in_the_named_schema(client: Querator, pg_dsn: str, pg_schema: str) -> None:
    client.create_queue("lives-here")
    client.produce("lives-here", [Item(payload=b"x")])
    assert relations(pg_dsn, pg_schema), f"no tables were created in schema {pg_schema}"


def test_table_names_never_hold_user_strings(client: Querator, pg_dsn: str, pg_schema: str) -> None:
    name = "UserChosen_Name.with-dots"
    client.create_queue(name, QueueSettings(partitions=2))
    names = relations(pg_dsn, pg_schema)
    assert not [t for t in names if "userchosen" in t.lower()], names


def test_partition_tables_follow_create_update_delete(
    client: Querator, pg_dsn: str, pg_schema: str
) -> None:
    client.create_queue("base")
    baseline = len(relations(pg_dsn, pg_schema))

    client.create_queue("parted", QueueSettings(partitions=3))
    assert len(relations(pg_dsn, pg_schema)) >= baseline + 3
    with_three = len(relations(pg_dsn, pg_schema))

    client.update_queue("parted", QueueSettings(partitions=5))
    assert len(relations(pg_dsn, pg_schema)) == with_three + 2

    client.delete_queue("parted")
    assert len(relations(pg_dsn, pg_schema)) == baseline


def test_two_schemas_are_separate_stores(pg_dsn: str, pg_schema_url: str) -> None:
    other_schema = f"t_{secrets.token_hex(8)}"
    try:
        with Querator(pg_schema_url) as a, Querator(with_query(pg_dsn, schema=other_schema)) as b:
            a.create_queue("same-name")
            b.create_queue("same-name")
            a.produce("same-name", [Item(payload=b"a")] * 2)
            b.produce("same-name", [Item(payload=b"b")])
            assert a.stats("same-name").total == 2
            assert [i.payload for i in b.list_items("same-name")] == [b"b"]
    finally:
        drop_schema(pg_dsn, other_schema)


def test_unreachable_server_raises_unavailable() -> None:
    started = time.monotonic()
    with (
        pytest.raises(Unavailable) as err,
        Querator("postgresql://root@127.0.0.1:1/test?connect_timeout=2") as q,
    ):
        q.list_queues()  # opening or the first call may be what connects
    assert isinstance(err.value, QueratorError)
    assert err.value.retryable
    assert "Connection refused" in str(err.value)  # the cause, at once
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("path", "cause"),
    [
        ("test_no_such_database_here", 'database "test_no_such_database_here" does not exist'),
        ("test", 'role "no_such_role_here" does not exist'),
    ],
)
def test_a_refused_connection_string_fails_at_once_naming_why(
    pg_dsn: str, path: str, cause: str
) -> None:
    parts = urlsplit(pg_dsn)
    user = "no_such_role_here" if "role" in cause else parts.username
    bad = f"postgresql://{user}@{parts.hostname}:{parts.port or 5432}/{path}"
    started = time.monotonic()
    with pytest.raises(InvalidArgument) as err, Querator(bad):
        pass
    assert cause in str(err.value)
    assert time.monotonic() - started < 5


def test_pooled_connections_share_session_settings(pg_schema_url: str) -> None:
    """Every pooled connection runs in UTC with generic plans, index scans and no JIT
    (two held at once: two connections)."""
    backend = PostgresBackend(pg_schema_url)
    query = (
        "SELECT current_setting('TimeZone'), current_setting('plan_cache_mode'),"
        " current_setting('enable_seqscan'), current_setting('jit')"
    )

    async def settings() -> list[tuple[str, ...]]:
        await backend.open()
        try:
            async with backend._connect() as one, backend._connect() as two:
                rows = [await (await conn.execute(query)).fetchone() for conn in (one, two)]
            return [tuple(map(str, row)) for row in rows if row is not None]
        finally:
            await backend.close()

    assert anyio.run(settings) == [("UTC", "force_generic_plan", "off", "off")] * 2


def test_pool_settings_come_from_the_url(pg_schema_url: str) -> None:
    """``pool_min``/``pool_max``/``pool_timeout`` size the pool (and never reach
    the server as connection options); bad values are refused before connecting."""
    url = f"{pg_schema_url}&pool_min=2&pool_max=3&pool_timeout=7"
    backend = PostgresBackend(url)

    async def sizes() -> tuple[int, int, float]:
        await backend.open()
        try:
            pool = backend._pool
            assert pool is not None
            return pool.min_size, pool.max_size, pool.timeout
        finally:
            await backend.close()

    assert anyio.run(sizes) == (2, 3, 7.0)
    for bad, why in [("pool_max=0", "pool_max"), ("pool_min=4&pool_max=2", "exceed")]:
        with pytest.raises(InvalidArgument, match=why):
            PostgresBackend(f"{pg_schema_url}&{bad}")
