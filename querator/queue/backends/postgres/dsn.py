"""Splitting querator's own options out of a PostgreSQL connection string."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from querator.errors import InvalidArgument

_URL_SCHEMES = ("postgresql", "postgres")


class ConnectTarget(NamedTuple):
    """What to hand psycopg, the schema querator keeps its tables in, and the
    connection pool's settings."""

    conninfo: str
    schema: str
    pool_min: int = 1
    """Connections the pool keeps open (``?pool_min=``)."""
    pool_max: int = 10
    """Connections the pool opens at most (``?pool_max=``)."""
    pool_timeout: float = 30.0
    """Seconds a call waits for a free connection before Unavailable (``?pool_timeout=``)."""
    statement_deadline: float = 30.0
    """Seconds a call's statements may take on their connection before the call fails
    Unavailable and the connection is discarded (``?statement_deadline=``); a
    statement waiting on a lock gives up after as long (PostgreSQL's ``lock_timeout``)."""


POOL_OPTIONS = ("pool_min", "pool_max", "pool_timeout", "statement_deadline")
"""Query parameters of a URL DSN that configure querator's pool, not psycopg."""


def _count(found: dict[str, str], key: str, default: int) -> int:
    if key not in found:
        return default
    if not found[key].isdigit() or not 1 <= int(found[key]) <= 1000:
        raise InvalidArgument("dsn", f"{key} must be a whole number 1 to 1000")
    return int(found[key])


def _seconds(found: dict[str, str], key: str, default: float) -> float:
    if key not in found:
        return default
    try:
        value = float(found[key])
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise InvalidArgument("dsn", f"{key} must be seconds, over 0 and at most 3600")
    return value


def split_dsn(dsn: str, schema: str) -> ConnectTarget:
    """Strip querator's query parameters from a URL DSN: ``schema`` (overrides
    ``schema``), ``pool_min``, ``pool_max``, ``pool_timeout`` and
    ``statement_deadline`` (defaults: :class:`ConnectTarget`).

    ``postgresql+psycopg://`` style schemes are accepted and normalised. A
    key/value conninfo string is passed through unchanged.
    """
    if "://" not in dsn:
        return ConnectTarget(dsn, schema)
    parts = urlsplit(dsn)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in _URL_SCHEMES:
        raise InvalidArgument("dsn", f"scheme must be postgresql://, got {parts.scheme!r}")
    kept: list[tuple[str, str]] = []
    ours: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            schema = value
        elif key in POOL_OPTIONS:
            ours[key] = value
        else:
            kept.append((key, value))
    conninfo = urlunsplit((scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    defaults = ConnectTarget(conninfo, schema)
    pool_min = _count(ours, "pool_min", defaults.pool_min)
    pool_max = _count(ours, "pool_max", max(defaults.pool_max, pool_min))
    if pool_min > pool_max:
        raise InvalidArgument("dsn", "pool_min must not exceed pool_max")
    timeout = _seconds(ours, "pool_timeout", defaults.pool_timeout)
    deadline = _seconds(ours, "statement_deadline", defaults.statement_deadline)
    return ConnectTarget(conninfo, schema, pool_min, pool_max, timeout, deadline)
