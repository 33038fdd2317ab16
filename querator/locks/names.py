"""How a semaphore is laid out in the queue layer, and the rules for its input.

- A semaphore named ``name`` is the queue ``querator.lock.<name>``; the queue's
  ``reference`` setting holds its limit (``semaphore limit=<N>``), so every
  client reads the limit with the queue's cached settings.
- Each permit is one item of that queue, ``dedup_key`` ``permit-<i>`` for
  ``0 <= i < limit``: producing the permits again adds nothing, so creation is
  idempotent and two processes creating one semaphore get the same permits.
- A permit's fencing token is ``base + version``: ``base`` (0 at first, in the
  payload as JSON) carries the tokens of a permit across its renewal as a new
  item: a release within :data:`RENEW_ITEM_WITHIN` of the item's ``expire_at``
  completes it and produces its successor (same dedup key, ``base`` = the
  old version) in one transaction, so permits in use never expire and tokens
  never go back.
- A permit whose index is at or past the limit (the limit was lowered) is
  surplus: it is completed (removed) when its holder releases it, or when an
  acquirer leases it, instead of being given back.

Pure code: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta

from querator.errors import InvalidArgument
from querator.queue.models import Item, QueueInfo, QueueSettings
from querator.queue.validation import MAX_BATCH, MAX_DURATION, quoted

QUEUE_PREFIX = "querator.lock."
"""The queue of semaphore ``name`` is ``QUEUE_PREFIX + name``."""
PERMIT_KIND = "querator.permit"
"""The ``kind`` of permit items."""
MAX_NAME = 200
"""The longest semaphore name, in characters."""
MAX_LIMIT = MAX_BATCH
"""The most permits one semaphore may have."""
DEFAULT_LEASE = 15.0
"""Seconds a permit's lease lasts between renewals, unless the semaphore says."""
RENEW_ITEM_WITHIN = timedelta(days=183)
"""A permit released this close to its item's expiry is replaced by a new item."""
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_REFERENCE = re.compile(r"semaphore limit=(\d+)")
_PERMIT_KEY = re.compile(r"permit-(\d+)")


def check_lock_name(value: object) -> str:
    """``value`` if it is a valid semaphore (or rate limit) name: 1-:data:`MAX_NAME`
    letters, digits, ``.``, ``_`` or ``-`` (so no control character), else
    InvalidArgument."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME:
        raise InvalidArgument(
            "name", f"must be a string of 1-{MAX_NAME} characters, got {quoted(value)}"
        )
    if not _NAME.fullmatch(value):
        raise InvalidArgument(
            "name", f"{quoted(value)} may hold only letters, digits, '.', '_' and '-'"
        )
    return value


def check_limit(value: object) -> int:
    """``value`` if it is a whole number of permits in range, else InvalidArgument."""
    return check_count(value, "limit", "permits", MAX_LIMIT)


def check_count(value: object, field: str, what: str, most: int) -> int:
    """``value`` if it is a whole number of ``what`` from 1 to ``most``, else
    InvalidArgument naming ``field`` (shared by semaphores and rate limits)."""
    if isinstance(value, float) and math.isnan(value):
        raise InvalidArgument(field, f"must be a whole number of {what}, got NaN")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"must be a whole number of {what}, got {quoted(value)}")
    if not 1 <= value <= most:
        raise InvalidArgument(field, f"must be from 1 to {most}, got {value}")
    return value


def check_lease(value: object) -> float:
    """``value`` as seconds if it is a lease duration of 0.1 s to a day."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument("lease", f"must be a number of seconds, got {quoted(value)}")
    if not 0.1 <= value <= 86_400:
        raise InvalidArgument("lease", f"must be from 0.1 to 86400 seconds, got {value}")
    return float(value)


def queue_of(name: str) -> str:
    """The queue that holds the permits of semaphore ``name``."""
    return QUEUE_PREFIX + check_lock_name(name)


def name_of(queue: str) -> str | None:
    """The semaphore a queue holds the permits of, or None for other queues."""
    return queue[len(QUEUE_PREFIX) :] if queue.startswith(QUEUE_PREFIX) else None


def settings_for(limit: int, lease: float) -> QueueSettings:
    """The permit queue's settings: permits never dead-letter (unlimited
    attempts, no dead queue) and live as long as the queue layer lets any item
    live; the limit rides in ``reference``."""
    return QueueSettings(
        lease_timeout=lease,
        expire_timeout=MAX_DURATION,
        max_attempts=0,
        dead_queue=None,
        reference=f"semaphore limit={limit}",
    )


def limit_of(info: QueueInfo) -> int:
    """The limit a permit queue's settings hold (0 when they hold none)."""
    found = _REFERENCE.fullmatch(info.settings.reference)
    return int(found.group(1)) if found else 0


def permits(limit: int) -> list[Item]:
    """The permit items of a semaphore of ``limit`` (produce them: keys dedup)."""
    return [Item(kind=PERMIT_KIND, dedup_key=f"permit-{index}") for index in range(limit)]


def successor(dedup_key: str | None, version: int, base: int) -> Item:
    """The item that replaces a permit item whose expiry nears (its tokens go on)."""
    payload = json.dumps({"base": base + version}).encode()
    return Item(kind=PERMIT_KIND, dedup_key=dedup_key, payload=payload, encoding="json")


def base_of(payload: bytes) -> int:
    """The token base a permit item carries (0 for the first item of a permit)."""
    if not payload:
        return 0
    try:
        base = json.loads(payload).get("base", 0)
    except (ValueError, AttributeError):
        return 0
    return base if isinstance(base, int) and base >= 0 else 0


def token_of(payload: bytes, version: int) -> int:
    """A permit item's fencing token at ``version``."""
    return base_of(payload) + version


def index_of(dedup_key: str | None) -> int:
    """The index of a permit from its dedup key (-1 for an item that is no permit)."""
    found = _PERMIT_KEY.fullmatch(dedup_key or "")
    return int(found.group(1)) if found else -1
