"""``Concurrency``: at most ``limit`` holders per key of a named limit, across
every worker of the store (the spec; :mod:`querator.limits.gate` enforces it).

Each key of a limit is a semaphore (:mod:`querator.locks`) named
``<limit name>.<16 hex digits of the key's hash>``: a holder leases a permit,
renews it while it runs, and hands it to the oldest parked waiter of that key
when it ends.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from querator.errors import InvalidArgument
from querator.limits.rate import RateLimit
from querator.limits.rules import check_key
from querator.locks.names import DEFAULT_LEASE, MAX_NAME, check_lease, check_limit, check_lock_name

MAX_LIMIT_NAME = MAX_NAME - 17
"""The longest concurrency limit name (its semaphores add ``.`` and 16 hex digits)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class Concurrency:
    """At most ``limit`` running at once per key, across every worker.

    ``key`` (optional) computes the key from the limited call's arguments
    (None: one key for every call); ``name`` names the limit, so several steps
    that give the same name share it (default: the step's own name); ``lease``
    is how many seconds a permit of a holder that died stays taken."""

    __slots__ = ("key", "lease", "limit", "name")

    def __init__(
        self,
        limit: int,
        *,
        key: Callable[..., Any] | None = None,
        name: str | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self.limit = check_limit(limit)
        """Holders at once per key."""
        if key is not None and not callable(key):
            raise InvalidArgument("key", "must be a function of the limited call's arguments")
        self.key = key
        """The function giving a call's key (None: one key)."""
        if name is not None:
            check_lock_name(name)
            if len(name) > MAX_LIMIT_NAME:
                raise InvalidArgument("name", f"must be at most {MAX_LIMIT_NAME} characters")
        self.name = name
        """The limit's name (None: the limited function's persisted name)."""
        self.lease = check_lease(lease)
        """Seconds a permit stays taken unless its holder renews it."""

    def __repr__(self) -> str:
        return f"Concurrency({self.limit}, name={self.name!r})"

    def limit_name(self, owner: str) -> str:
        """The limit's name, ``owner`` (a persisted function name) when it has none."""
        if self.name is not None:
            return self.name
        safe = _UNSAFE.sub("_", owner)[: MAX_LIMIT_NAME - 9]
        return f"{safe}.{_digest(owner)[:8]}"

    def semaphore(self, owner: str, key: str) -> str:
        """The semaphore of ``key`` (see the module)."""
        return f"{self.limit_name(owner)}.{_digest(key)[:16]}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def key_of(fn: Callable[..., Any] | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The key of a call: ``fn(*args, **kwargs)`` as a string ("-" without ``fn``).
    A key function that raises, or returns neither a string nor an int, is
    :class:`~querator.errors.InvalidArgument`."""
    if fn is None:
        return "-"
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        raise InvalidArgument("key", f"the key function raised {exc!r}") from exc
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return check_key(value)


def limit_keys(
    concurrency: Concurrency | None,
    rate_limit: RateLimit | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> tuple[str, str]:
    """The keys of a call under its concurrency and rate limits ("-" without
    one); :class:`~querator.errors.InvalidArgument` when a key function raises."""
    return (
        key_of(concurrency.key if concurrency else None, args, kwargs),
        key_of(rate_limit.key if rate_limit else None, args, kwargs),
    )
