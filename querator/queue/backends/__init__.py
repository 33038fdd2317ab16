"""Storage backends, and the factory that picks one from a URL.

=============================================  ===========================
URL                                            backend
=============================================  ===========================
``postgresql://user@host:port/db?schema=s``    PostgreSQL (psycopg 3)
``sqlite:///relative/or/abs.db``               SQLite file (the default)
``memory://``                                  in-process, ephemeral
=============================================  ===========================

``?namespace=name`` on any of them (or ``namespace=`` given to a client) picks a
namespace of the store: :mod:`.namespaces`.
"""

from __future__ import annotations

from querator.clock import SYSTEM, Clock
from querator.errors import InvalidArgument
from querator.queue.backends.base import Backend
from querator.queue.backends.namespaces import namespaced_url
from querator.queue.options import DEFAULT_URL as DEFAULT_URL

# DEFAULT_URL moved to querator.queue.options; kept for the branches merged after.


def open_backend(url: str, clock: Clock = SYSTEM, namespace: str | None = None) -> Backend:
    """The backend of ``namespace`` (else the URL's ``?namespace=``, else the
    default namespace) of the store ``url`` names (not yet opened), reading time
    from ``clock``."""
    if not isinstance(url, str):
        raise InvalidArgument("url", f"must be a string, got {type(url).__name__}")
    url = namespaced_url(url, namespace)
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        from querator.queue.backends.postgres.backend import PostgresBackend

        return PostgresBackend(url.replace("postgresql+psycopg:", "postgresql:", 1), clock=clock)
    if scheme == "sqlite":
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise InvalidArgument("url", "SQLite URLs look like sqlite:///path/to/file.db")
        from querator.queue.backends.sqlite.backend import SqliteBackend

        return SqliteBackend(path[1:], clock)
    if url.rstrip("/") == "memory:":
        from querator.queue.backends.memory import MemoryBackend

        return MemoryBackend(clock)
    raise InvalidArgument(
        "url", f"unknown scheme in {url!r}: use postgresql://, sqlite:/// or memory://"
    )
