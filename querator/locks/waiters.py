"""Who waits for a permit, and the wake-one hand-off.

Every client that waits for a permit of semaphore ``name`` holds a *waiter
record*: an item of the queue ``querator.lockwait.<name>``, produced leased to
the waiter and renewed while it waits (a waiter that dies stops renewing: its
record's lease runs out, it counts no more, and the maintenance sweep removes
it, as records have one attempt and no dead queue). The record names a wakeup
of the waiter's own (``querator.lockwake.<random>``) that the waiter watches.

A release wakes the oldest live waiter, and only it, with the commit that frees
the permit: the waiter then leases a permit. Waiters queue in arrival order;
an acquirer that arrives while a permit is free takes it without waiting.

Records are advisory and committed without waiting for the disk
(``durable=False``): losing one in a crash of the server only makes its waiter
register again.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from querator.errors import Conflict, QueueNotFound
from querator.locks.names import DEFAULT_LEASE, MAX_LIMIT, check_lock_name
from querator.model_bases import View
from querator.queue.models import Item, Leased, QueueSettings, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION

WAIT_PREFIX = "querator.lockwait."
"""The waiter records of semaphore ``name`` are items of ``WAIT_PREFIX + name``."""
WAKE_PREFIX = "querator.lockwake."
"""A waiter's own wakeup name is ``WAKE_PREFIX`` + 16 hex digits."""
RECORD_KIND = "querator.lock-waiter"
"""The ``kind`` of waiter records."""
RECORD_LEASE = DEFAULT_LEASE
"""Seconds a waiter record lives unless renewed, when its semaphore does not say
(a record lives as long as its semaphore's lease; renewed every third of it)."""
_WAKE = re.compile(re.escape(WAKE_PREFIX) + "[0-9a-f]{16}")
SCAN = MAX_LIMIT
"""Waiter records read at most, to find the oldest live one or to list them."""


class Waiter(View):
    """A client waiting for a permit."""

    client_id: str
    """Who waits."""
    since: datetime | None
    """When it began to wait (its clock)."""


@dataclass(slots=True)
class Record:
    """This process's waiter record while it waits."""

    name: str
    """The semaphore."""
    wake: str
    """The waiter's own wakeup name."""
    held: Leased
    """The record item, as last produced or renewed."""


def wait_queue(name: str) -> str:
    """The queue of semaphore ``name``'s waiter records."""
    return WAIT_PREFIX + check_lock_name(name)


def new_wake_name() -> str:
    """A fresh wakeup name for one waiter."""
    return WAKE_PREFIX + secrets.token_hex(8)


def _settings(lease: float) -> QueueSettings:
    return QueueSettings(
        lease_timeout=lease,
        expire_timeout=MAX_DURATION,
        max_attempts=1,
        dead_queue=None,
        reference="semaphore waiters",
    )


async def ensure_wait_queue(aq: AsyncQueueClient, name: str, lease: float = RECORD_LEASE) -> None:
    """Create semaphore ``name``'s waiter queue, or bring its records' lease to
    ``lease`` seconds (the semaphore's: a dead waiter counts no more after it)."""
    queue, settings = wait_queue(name), _settings(lease)
    info = await aq.create_queue(queue, settings, exist_ok=True)
    if info.settings != settings:
        await aq.update_queue(queue, settings)


async def record_lease(aq: AsyncQueueClient, name: str) -> float:
    """Seconds a waiter record of ``name`` lives unless renewed."""
    try:
        return (await aq.queue_info(wait_queue(name))).settings.lease_timeout
    except QueueNotFound:
        return RECORD_LEASE


async def register(aq: AsyncQueueClient, name: str, client_id: str, wake: str) -> Record:
    """Record ``client_id`` as waiting for a permit of ``name``, woken by ``wake``."""
    queue = wait_queue(name)
    since = aq.clock.now()
    body = {"client_id": client_id, "since": since.isoformat(), "wake": wake}
    item = Item(kind=RECORD_KIND, payload=json.dumps(body).encode(), encoding="json")
    for _ in range(2):
        try:
            result = await aq.commit(
                produce_leased={queue: [item]}, client_id=client_id, silent=[queue], durable=False
            )
        except QueueNotFound:
            await ensure_wait_queue(aq, name)
            continue
        [held] = result.leased[queue]
        assert held is not None  # a fresh item without dedup key is always leasable
        return Record(name, wake, held)
    raise QueueNotFound(queue)


async def renew(aq: AsyncQueueClient, record: Record) -> bool:
    """Keep ``record`` alive; False when it was lost (register again)."""
    try:
        result = await aq.commit(renew=[record.held], durable=False)
    except (Conflict, QueueNotFound):
        return False
    [record.held] = result.renewed
    return True


async def unregister(aq: AsyncQueueClient, record: Record) -> None:
    """Remove ``record``: its client waits no more."""
    with contextlib.suppress(Conflict, QueueNotFound):
        await aq.commit(complete=[record.held], durable=False)


async def next_wakes(aq: AsyncQueueClient, name: str, count: int) -> list[str]:
    """The wakeup names of the ``count`` oldest live waiters of ``name``."""
    if count <= 0:
        return []
    found: list[str] = []
    for item in await _records(aq, name):
        body = _body(item) or {}
        wake = body.get("wake")
        if isinstance(wake, str) and _WAKE.fullmatch(wake) and wake not in found:
            found.append(wake)
            if len(found) == count:
                break
    return found


async def waiters_of(aq: AsyncQueueClient, name: str) -> list[Waiter]:
    """The live waiters of ``name``, oldest first."""
    found = []
    for item in await _records(aq, name):
        body = _body(item) or {}
        found.append(Waiter(client_id=str(body.get("client_id", "")), since=_since(body)))
    return found


async def _records(aq: AsyncQueueClient, name: str) -> list[StoredItem]:
    """Live waiter records (leased, lease not run out), oldest first."""
    try:
        items = await aq.list_items(wait_queue(name), limit=SCAN)
    except QueueNotFound:
        return []
    now = aq.clock.now()
    return [item for item in items if item.lease_deadline is not None and item.lease_deadline > now]


def _body(item: StoredItem) -> dict[str, object] | None:
    try:
        body = json.loads(item.payload)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _since(body: dict[str, object]) -> datetime | None:
    stamp = body.get("since")
    if not isinstance(stamp, str):
        return None
    try:
        since = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return since if since.tzinfo else since.replace(tzinfo=UTC)
