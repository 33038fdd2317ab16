"""How a rate limit is laid out in the queue layer, and the rules for its input.

- Rate limit ``name`` is the queue ``querator.rate.<name>``; its settings'
  ``reference`` holds ``rate limit=<n> per=<seconds>``, and its lease lasts
  ``per`` seconds.
- Each key has ``n`` *slot* items (``kind`` = the key). A start leases one; the
  lease is never given back: the slot comes back ``per`` seconds later, when
  the lease runs out. So no window of ``per`` seconds holds more than ``n``
  starts of a key, by the database's clock, across every process.
- A key's slots are made on its first use, available ``per / n`` seconds
  apart: starts are spread evenly over the period (no burst of ``n`` at once,
  nor of ``2n`` at a window's edge), and each slot keeps its place in the
  period from then on.

Pure code: no I/O.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime, timedelta

from querator.errors import InvalidArgument
from querator.locks.names import MAX_NAME as LOCK_NAME_MAX
from querator.locks.names import check_count, check_lock_name
from querator.queue.models import Item, QueueSettings
from querator.queue.validation import MAX_BATCH, MAX_DURATION, quoted

QUEUE_PREFIX = "querator.rate."
"""The queue of rate limit ``name`` is ``QUEUE_PREFIX + name``."""
MAX_NAME = LOCK_NAME_MAX
"""The longest rate limit name, in characters (as a semaphore's)."""
MAX_N = MAX_BATCH
"""The most starts one rate limit admits per period and key."""
MAX_KEY = 400
"""The longest key, in characters."""
MIN_PER, MAX_PER = 0.01, 86_400.0
"""The shortest and longest period, in seconds."""
_REFERENCE = re.compile(r"rate limit=(\d+) per=([0-9.e+-]+)")


def check_rate_name(value: object) -> str:
    """``value`` if it is a valid rate limit name (the rules of semaphore names)."""
    return check_lock_name(value)


def check_n(value: object) -> int:
    """``value`` if it is a whole number of starts from 1 to :data:`MAX_N`."""
    return check_count(value, "n", "starts", MAX_N)


def check_per(value: object) -> float:
    """``value`` as seconds if it is a period from :data:`MIN_PER` to :data:`MAX_PER`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument("per", f"must be a finite number of seconds, got {quoted(value)}")
    if not MIN_PER <= value <= MAX_PER:
        raise InvalidArgument("per", f"must be from {MIN_PER} to {MAX_PER:g} seconds, got {value}")
    return float(value)


def check_key(value: object) -> str:
    """``value`` if it is a key: a string of 1-:data:`MAX_KEY` characters without NUL."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY or "\x00" in value:
        raise InvalidArgument(
            "key", f"must be a string of 1-{MAX_KEY} characters without NUL, got {quoted(value)}"
        )
    return value


def queue_of(name: str) -> str:
    """The queue that holds the slots of rate limit ``name``."""
    return QUEUE_PREFIX + check_rate_name(name)


def settings_for(n: int, per: float) -> QueueSettings:
    """The slot queue's settings: a lease of ``per`` seconds, slots that never
    dead-letter; ``n`` and ``per`` ride in ``reference``."""
    return QueueSettings(
        lease_timeout=per,
        expire_timeout=MAX_DURATION,
        max_attempts=0,
        dead_queue=None,
        reference=f"rate limit={n} per={per!r}",
    )


def limits_of(reference: str) -> tuple[int, float] | None:
    """``(n, per)`` from a slot queue's ``reference`` (None: not a rate limit's)."""
    found = _REFERENCE.fullmatch(reference)
    return (int(found.group(1)), float(found.group(2))) if found else None


def slot_keys(key: str, n: int) -> list[str]:
    """The dedup keys of ``key``'s ``n`` slots."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return [f"s{index}.{digest}" for index in range(n)]


def slots(key: str, n: int, per: float, now: datetime) -> list[Item]:
    """``key``'s slot items, available ``per / n`` seconds apart from ``now``."""
    step = per / n
    return [
        Item(kind=key, dedup_key=dedup, enqueue_at=now + timedelta(seconds=index * step))
        for index, dedup in enumerate(slot_keys(key, n))
    ]
