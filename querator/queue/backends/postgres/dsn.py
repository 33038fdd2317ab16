"""Splitting querator's own options out of a PostgreSQL connection string."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from querator.errors import InvalidArgument

_URL_SCHEMES = ("postgresql", "postgres")


class ConnectTarget(NamedTuple):
    """What to hand psycopg, and the schema querator keeps its tables in."""

    conninfo: str
    schema: str


def split_dsn(dsn: str, schema: str) -> ConnectTarget:
    """Strip a ``schema`` query parameter from a URL DSN; it overrides ``schema``.

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
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            schema = value
        else:
            kept.append((key, value))
    conninfo = urlunsplit((scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return ConnectTarget(conninfo, schema)
