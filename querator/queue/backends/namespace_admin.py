"""Creating, listing and deleting the namespaces of a store (``querator namespaces``).

Where each namespace lives is :mod:`.namespaces`'s rule. Creating one opens a
client on it (which makes its schema or file); deleting one drops its schema
(``DROP SCHEMA ... CASCADE``: on Citus, the distributed schema on its node) or
removes its file. The default namespace is listed when it exists and is never
deleted here. Moving one to another node is Citus's ``citus_schema_move`` on the
coordinator: querator keeps serving it while Citus copies it (writes wait only
at the switch with ``auto``, which needs ``wal_level = logical`` on the nodes;
``block_writes`` holds writes for the whole copy).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
from psycopg import sql

from querator.errors import InvalidArgument
from querator.queue.backends.namespaces import (
    DEFAULT_NAMESPACE,
    DEFAULT_SCHEMA,
    SCHEMA_SEPARATOR,
    check_namespace,
    schema_of,
    split_namespace,
    sqlite_path_of,
)
from querator.queue.backends.postgres.dsn import split_dsn
from querator.queue.backends.postgres.failures import driver_errors

MOVE_MODES = ("auto", "force_logical", "block_writes")
"""Citus's shard transfer modes, the ways :func:`move_namespace` may move."""

_MOVE = (
    "SELECT citus_schema_move(%(schema)s::regnamespace, %(host)s, %(port)s,"
    " %(mode)s::citus.shard_transfer_mode)"
)
_CITUS_VERSION = "SELECT current_setting('citus.version', true)"

_SQLITE_PREFIX = "sqlite:///"
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")

_STORE_SCHEMAS = """
SELECT n.nspname FROM pg_namespace AS n
WHERE (n.nspname = %(base)s OR starts_with(n.nspname, %(prefix)s))
  AND to_regclass(quote_ident(n.nspname) || '.schema_version') IS NOT NULL
ORDER BY n.nspname
"""
"""The schemas of a store's namespaces: the base one and those named after it,
each holding querator's version table."""


def _base_url(url: str) -> str:
    bare, namespace = split_namespace(url)
    if namespace != DEFAULT_NAMESPACE:
        raise InvalidArgument("url", "name the store, not one of its namespaces (no ?namespace=)")
    return bare


def _kind(url: str) -> str:
    scheme = url.split(":", 1)[0].lower()
    if scheme.startswith("postgres"):
        return "postgres"
    if url.startswith(_SQLITE_PREFIX):
        return "sqlite"
    return "memory"


def list_namespaces(url: str) -> list[str]:
    """The namespaces of the store ``url`` names (the default one first, when it exists)."""
    url = _base_url(url)
    kind = _kind(url)
    if kind == "postgres":
        target = split_dsn(url, DEFAULT_SCHEMA)
        prefix = target.schema + SCHEMA_SEPARATOR
        with driver_errors(), psycopg.connect(target.conninfo, autocommit=True) as conn:
            rows = conn.execute(_STORE_SCHEMAS, {"base": target.schema, "prefix": prefix})
            names = [str(row[0]) for row in rows.fetchall()]
        return [DEFAULT_NAMESPACE if n == target.schema else n[len(prefix) :] for n in names]
    if kind == "sqlite":
        path = url.removeprefix(_SQLITE_PREFIX)
        found = [DEFAULT_NAMESPACE] if Path(path).exists() else []
        folder = Path(sqlite_path_of(path, "x")).parent
        if folder.is_dir():
            found += sorted(p.stem for p in folder.glob("*.db"))
        return found
    return [DEFAULT_NAMESPACE]


def delete_namespace(url: str, namespace: str) -> None:
    """Drop ``namespace`` of the store ``url`` names, with everything in it;
    InvalidArgument for the default namespace or one that does not exist."""
    url = _base_url(url)
    check_namespace(namespace)
    if namespace == DEFAULT_NAMESPACE:
        raise InvalidArgument("namespace", "the default namespace is the store itself")
    if namespace not in list_namespaces(url):
        raise InvalidArgument("namespace", f"no namespace {namespace!r} in this store")
    kind = _kind(url)
    if kind == "postgres":
        target = split_dsn(url, DEFAULT_SCHEMA)
        schema = sql.Identifier(schema_of(target.schema, namespace))
        with driver_errors(), psycopg.connect(target.conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(schema))
    elif kind == "sqlite":
        path = sqlite_path_of(url.removeprefix(_SQLITE_PREFIX), namespace)
        for suffix in _SQLITE_SIDE_FILES:
            Path(path + suffix).unlink(missing_ok=True)
        shutil.rmtree(path + ".wake", ignore_errors=True)  # its wake-up sockets


def move_namespace(url: str, namespace: str, host: str, port: int, mode: str = "auto") -> None:
    """Move ``namespace`` of the Citus coordinator ``url`` names (the default
    namespace too) to the worker node at ``host:port``, with Citus's transfer
    ``mode`` (:data:`MOVE_MODES`); InvalidArgument off PostgreSQL, for a
    namespace that does not exist, or when the node refuses it."""
    url = _base_url(url)
    check_namespace(namespace)
    if _kind(url) != "postgres":
        raise InvalidArgument("url", "namespaces move between the nodes of a Citus cluster")
    if mode not in MOVE_MODES:
        raise InvalidArgument("mode", f"must be one of {', '.join(MOVE_MODES)}")
    if not 0 < port < 65536:
        raise InvalidArgument("port", "must be 1 to 65535")
    if namespace not in list_namespaces(url):
        raise InvalidArgument("namespace", f"no namespace {namespace!r} in this store")
    target = split_dsn(url, DEFAULT_SCHEMA)
    params = {
        "schema": schema_of(target.schema, namespace),
        "host": host,
        "port": port,
        "mode": mode,
    }
    with driver_errors(), psycopg.connect(target.conninfo, autocommit=True) as conn:
        if conn.execute("SELECT current_setting('citus.version', true)").fetchone() in (
            None,
            (None,),
        ):
            raise InvalidArgument(
                "url", "not a Citus coordinator: namespaces move between its nodes"
            )
        conn.execute(_MOVE, params)
