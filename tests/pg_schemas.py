"""PostgreSQL test schemas: a URL naming one, and dropping it."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to (or replaced in) its query string."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    query.extend(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (a no-op when it does not exist)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def waiting_on_a_lock(dsn: str, marker: str) -> bool:
    """True when a session whose statement mentions ``marker`` waits on a lock."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND query LIKE %s",
            (f"%{marker}%",),
        ).fetchone()
    return row is not None and row[0] > 0
