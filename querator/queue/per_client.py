"""State other modules keep for one store client (its permit source, shared
result look-ups, rate limiters), held by the client itself.

A module-level ``WeakKeyDictionary`` keyed by the client would keep every
client alive for good: its values (a permit source, a limiter) refer back to
the client. Kept here, they form an ordinary cycle with it, freed with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from querator.queue.service import AsyncQueueClient

T = TypeVar("T")


def per_client(aq: AsyncQueueClient, key: str, make: Callable[[], T]) -> T:
    """What ``aq`` keeps under ``key``, made by ``make()`` on first use."""
    kept = aq._per_client
    if key not in kept:
        kept[key] = make()
    return cast(T, kept[key])
