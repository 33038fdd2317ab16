"""Namespaces: which store of a URL a client uses.

A namespace holds queues and, through them, runs, schedules, webhooks, locks
and tokens; two namespaces never see each other's items or names. A client
serves one namespace (``Querator(url, namespace="acme")`` or ``?namespace=acme``
in the URL); the default namespace, :data:`DEFAULT_NAMESPACE`, is the store the
URL names, as it was before namespaces existed (no migration moves its data).

Each other namespace is a store of its own beside it:

- PostgreSQL: the schema ``<schema>__<namespace>`` (``<schema>`` is the URL's
  ``?schema=``, ``querator`` by default). On a Citus coordinator with
  schema-based sharding it is a distributed schema: Citus places it whole on
  one node (docs/scale-out.md).
- SQLite: the file ``<namespace>.db`` in the folder ``<file>-namespaces`` beside
  the URL's file (named as SQLite names its own ``-wal`` and ``-shm`` files).
- Memory: every ``memory://`` store is private to its client already; the
  namespace is checked and changes nothing.

Namespace names are lower-case words joined by single underscores, so the
schema and file names built from them never need quoting and never collide.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from querator.errors import InvalidArgument

DEFAULT_NAMESPACE: Final = "default"
"""The namespace a client uses unless told otherwise: the store the URL names."""

NAMESPACE_PATTERN: Final = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
"""Accepted namespace names (at most :data:`MAX_NAMESPACE` characters)."""

MAX_NAMESPACE: Final = 30
"""The longest namespace name (a PostgreSQL schema name holds at most 63 bytes)."""

DEFAULT_SCHEMA: Final = "querator"
"""The PostgreSQL schema of the default namespace when the URL names none."""

SCHEMA_SEPARATOR: Final = "__"
"""Between the URL's schema and a namespace in the namespace's schema name."""

_SQLITE_PREFIX: Final = "sqlite:///"

SQLITE_FOLDER_SUFFIX: Final = "-namespaces"
"""Appended to a SQLite file's name: the folder of its other namespaces' files."""


def check_namespace(namespace: object) -> str:
    """``namespace`` when it is a valid namespace name, else InvalidArgument."""
    if not isinstance(namespace, str):
        raise InvalidArgument("namespace", f"must be a string, got {type(namespace).__name__}")
    if len(namespace) > MAX_NAMESPACE or not NAMESPACE_PATTERN.fullmatch(namespace):
        raise InvalidArgument(
            "namespace",
            f"{namespace!r} must be lower-case letters and digits in words joined by single"
            f" underscores, starting with a letter, at most {MAX_NAMESPACE} characters",
        )
    return namespace


def split_namespace(url: str, namespace: str | None = None) -> tuple[str, str]:
    """The URL without its ``?namespace=`` and the namespace to use: ``namespace``
    when given, else the URL's, else :data:`DEFAULT_NAMESPACE`. Both given and
    different: InvalidArgument."""
    parts = urlsplit(url)
    kept: list[tuple[str, str]] = []
    in_url: str | None = None
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "namespace":
            in_url = check_namespace(value)
        else:
            kept.append((key, value))
    if namespace is not None:
        check_namespace(namespace)
        if in_url is not None and in_url != namespace:
            raise InvalidArgument(
                "namespace", f"{namespace!r} given, but the URL says namespace={in_url}"
            )
    chosen = namespace or in_url or DEFAULT_NAMESPACE
    if in_url is None:
        return url, chosen
    bare = url.split("?", 1)[0]
    return (bare + "?" + urlencode(kept) if kept else bare), chosen


def schema_of(base: str, namespace: str) -> str:
    """The PostgreSQL schema of ``namespace`` beside the default namespace's ``base``."""
    if namespace == DEFAULT_NAMESPACE:
        return base
    return f"{base}{SCHEMA_SEPARATOR}{namespace}"


def sqlite_path_of(path: str, namespace: str) -> str:
    """The SQLite file of ``namespace`` beside the default namespace's ``path``."""
    if namespace == DEFAULT_NAMESPACE:
        return path
    base = PurePosixPath(path)
    return str(base.with_name(base.name + SQLITE_FOLDER_SUFFIX) / f"{namespace}.db")


def namespaced_url(url: str, namespace: str | None = None) -> str:
    """The URL of the store that holds ``namespace`` (or the URL's ``?namespace=``):
    the default namespace's URL unchanged, another's with its schema or file
    (see the module doc)."""
    bare, chosen = split_namespace(url, namespace)
    if chosen == DEFAULT_NAMESPACE:
        return bare
    scheme = bare.split(":", 1)[0].lower()
    if scheme.startswith("postgres"):
        return _postgres_url(bare, chosen)
    if scheme == "sqlite" and bare.startswith(_SQLITE_PREFIX):
        return _SQLITE_PREFIX + sqlite_path_of(bare.removeprefix(_SQLITE_PREFIX), chosen)
    return bare


def _postgres_url(url: str, namespace: str) -> str:
    if "://" not in url:
        raise InvalidArgument("url", "a namespace needs a postgresql:// URL, not a conninfo string")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    base = next((value for key, value in query if key == "schema"), DEFAULT_SCHEMA)
    kept = [(key, value) for key, value in query if key != "schema"]
    kept.append(("schema", schema_of(base, namespace)))
    return urlunsplit(parts._replace(query=urlencode(kept)))


def with_namespace(url: str, namespace: str | None) -> str:
    """``url`` with ``?namespace=`` set to ``namespace`` (unchanged when None);
    InvalidArgument when the URL already names another one."""
    if namespace is None:
        return url
    bare, _ = split_namespace(url, namespace)
    if namespace == DEFAULT_NAMESPACE:
        return bare
    return bare + ("&" if "?" in bare else "?") + urlencode({"namespace": namespace})
