"""Option sets declared once, as ``TypedDict``s that the sync and async forms of
a call share through ``**options: Unpack[...]`` (an added option is one edit).

Defaults live with the one function that reads the options; the static type
checker checks names and types, and :func:`check_options` refuses unknown
names at run time with :class:`~querator.errors.InvalidArgument`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypedDict

from querator.clock import SYSTEM, Clock
from querator.errors import InvalidArgument
from querator.queue.models import Item, Leased, Ref
from querator.queue.validation import check_duration

__all__ = [
    "DEFAULT_URL",
    "ClientOptions",
    "ClientSettings",
    "TransactOptions",
    "check_options",
    "client_settings",
]

DEFAULT_URL = "sqlite:///querator.db"
"""The store a client opens when given no URL (and the CLI without ``--url``
or ``$QUERATOR_URL``)."""


class ClientOptions(TypedDict, total=False):
    """How a client talks to its store (see :class:`~querator.queue.service.AsyncQueueClient`)."""

    notifications: bool
    """Cross-process wakeups (default True; False: waiters poll)."""
    poll_interval: float
    """Seconds between polls of a waiting consumer without notifications (default 1)."""
    maintenance_interval: float
    """Seconds between offers to dead-letter exhausted and expired items (default 5)."""
    cache_ttl: float
    """Seconds a queue's settings are cached (default 1)."""
    wait_for_store: float
    """Seconds opening keeps trying while the store is unreachable (default 0)."""
    clock: Clock
    """The clock every decision reads (default: the store's own; a
    :class:`~querator.clock.ManualClock` lets tests step time)."""
    namespace: str
    """The namespace of the store this client serves (default: the URL's
    ``?namespace=``, else ``default``, the store the URL names); see docs/scale-out.md."""


class ClientSettings(NamedTuple):
    """:class:`ClientOptions` checked, every default filled in."""

    notifications: bool
    poll_interval: float
    maintenance_interval: float
    cache_ttl: float
    wait_for_store: float
    clock: Clock
    namespace: str | None
    """None: the URL's ``?namespace=``, else the default namespace."""


def client_settings(options: ClientOptions) -> ClientSettings:
    """The checked settings of a client given ``options`` (the defaults live here)."""
    check_options("Querator", options, ClientOptions)
    clock = options.get("clock", SYSTEM)
    if not isinstance(clock, Clock):
        raise InvalidArgument(
            "clock", f"must be a querator.clock.Clock, got {type(clock).__name__}"
        )
    return ClientSettings(
        notifications=options.get("notifications", True),
        poll_interval=check_duration("poll_interval", options.get("poll_interval", 1.0)),
        maintenance_interval=check_duration(
            "maintenance_interval", options.get("maintenance_interval", 5.0)
        ),
        cache_ttl=check_duration("cache_ttl", options.get("cache_ttl", 1.0)),
        wait_for_store=check_duration(
            "wait_for_store", options.get("wait_for_store", 0.0), allow_zero=True
        ),
        clock=clock,
        namespace=options.get("namespace"),
    )


class TransactOptions(TypedDict, total=False):
    """What one atomic transaction does (see :meth:`AsyncQuerator.transact`)."""

    complete: Sequence[Leased | Ref]
    retry: Sequence[Leased | Ref]
    renew: Sequence[Leased | Ref]
    depends: Sequence[Leased | Ref]
    """Items that must still hold these versions (nothing else is done to them)."""
    delete: Sequence[Leased | Ref]
    """Items to delete that must still hold these versions and that no live
    lease holds (``Conflict`` reason ``leased`` otherwise): an item not yet
    taken is removed, never one a consumer leased meanwhile."""
    produce: Mapping[str, Sequence[Item]] | None
    retry_at: datetime | None
    extend: float | None


def check_options(what: str, given: Mapping[str, Any], declared: type) -> None:
    """InvalidArgument naming the first option of ``given`` that ``declared`` lacks."""
    known = declared.__annotations__
    for name in given:
        if name not in known:
            choices = ", ".join(sorted(known))
            raise InvalidArgument(name, f"is not an option of {what} ({choices})")
