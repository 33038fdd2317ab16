"""Where schedules live: one record per schedule in ``querator.schedules``.

Records are never leased. A record is immutable (an item's payload never
changes), so a write produces a new record and deletes the old one. Two slots
per schedule name, ``schedule/{name}/a`` and ``schedule/{name}/b``, make that
a compare-and-set without locks:

1. read both slots; the record with the highest ``gen`` is current (a left-over
   older one is deleted by whoever sees it);
2. ``transact(depends=[current (id, version)], produce=[new record, gen + 1,
   fresh token, in the other slot])``: it fails if the current record was
   deleted meanwhile (someone else advanced), and if another writer filled the
   other slot first, the dedup key returns their record instead;
3. look the slot up: the write won iff the stored token is ours; then the old
   record is deleted.

Two writers of the same generation therefore never both win. Schedulers use
this for their bookkeeping; the runs themselves are exactly-once by their
idempotency key, whoever wins.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass

from pydantic import ValidationError

from querator.errors import Conflict, QueueNotFound
from querator.queue.models import Item, QueueSettings, Ref, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION
from querator.workflows.cron.schedules import ScheduleState

__all__ = ["SCHEDULES_QUEUE", "Stored", "read_all", "read_one", "write"]

log = logging.getLogger("querator.schedules")

SCHEDULES_QUEUE = "querator.schedules"
SCHEDULES_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
SCHEDULE_KIND = "querator.schedule"
SLOTS = ("a", "b")
PAGE = 500


@dataclass(frozen=True)
class Stored:
    """The current record of a schedule and the item holding it."""

    state: ScheduleState
    item: StoredItem
    slot: str
    stale: StoredItem | None = None
    """The other slot's older record, if one was left behind."""


def slot_key(name: str, slot: str) -> str:
    return f"schedule/{name}/{slot}"


def _decode(item: StoredItem, told: set[str] | None = None) -> ScheduleState | None:
    """The record's state; None for a record that is not one, said at ERROR
    (once per item id in ``told``, a scheduler's memory of what it said).

    Fields a newer version added are kept (``StoredModel``), so only a damaged
    record is skipped."""
    try:
        return ScheduleState.model_validate_json(item.payload)
    except ValidationError as exc:
        if told is not None:
            if item.id in told:
                return None
            told.add(item.id)
        log.error(
            "schedule record %s (item %s) cannot be read, skipped: %s",
            item.dedup_key,
            item.id,
            str(exc).splitlines()[0],
        )
        return None


def _pick(items: list[tuple[str, StoredItem]], told: set[str] | None = None) -> Stored | None:
    decoded = [(slot, item, state) for slot, item in items if (state := _decode(item, told))]
    if not decoded:
        return None
    decoded.sort(key=lambda entry: entry[2].gen)
    slot, item, state = decoded[-1]
    stale = decoded[0][1] if len(decoded) > 1 else None
    return Stored(state, item, slot, stale)


async def ensure_queue(aq: AsyncQueueClient) -> None:
    await aq.create_queue(SCHEDULES_QUEUE, SCHEDULES_SETTINGS, exist_ok=True)


async def read_one(aq: AsyncQueueClient, name: str) -> Stored | None:
    """The current record of schedule ``name`` (None: no such schedule)."""
    await ensure_queue(aq)
    keys = {slot_key(name, slot): slot for slot in SLOTS}
    found = await aq.lookup(SCHEDULES_QUEUE, list(keys))
    return _pick([(keys[key], item) for key, item in found.items()])


async def read_all(aq: AsyncQueueClient, told: set[str] | None = None) -> list[Stored]:
    """Every schedule's current record, by name (none while no schedule was ever
    written: a scheduler's pass over an empty store creates nothing). A damaged
    record is skipped, said at ERROR once per item id in ``told`` (every time
    without)."""
    by_name: dict[str, list[tuple[str, StoredItem]]] = {}
    try:
        info = await aq.get_queue(SCHEDULES_QUEUE)
    except QueueNotFound:
        return []
    for partition in range(info.settings.partitions):
        pivot: str | None = None
        while True:
            page = await aq.list_items(
                SCHEDULES_QUEUE, partition=partition, pivot=pivot, limit=PAGE
            )
            for item in page:
                if item.id == pivot or not item.dedup_key or item.kind != SCHEDULE_KIND:
                    continue
                _, _, rest = item.dedup_key.partition("/")
                name, _, slot = rest.rpartition("/")
                by_name.setdefault(name, []).append((slot, item))
            if len(page) < PAGE:
                break
            pivot = page[-1].id
    picked = (_pick(items, told) for _, items in sorted(by_name.items()))
    return [stored for stored in picked if stored is not None]


async def write(aq: AsyncQueueClient, current: Stored | None, state: ScheduleState) -> bool:
    """Replace ``current`` (None: create) with ``state``; True if this write won.

    False means another writer changed the schedule first (read it again).
    """
    await ensure_queue(aq)
    if current is not None and current.stale is not None:
        await _delete(aq, current.stale)
    slot = SLOTS[0] if current is None or current.slot == SLOTS[1] else SLOTS[1]
    gen = 0 if current is None else current.state.gen + 1
    new = state.model_copy(
        update={"gen": gen, "token": secrets.token_hex(8), "updated_at": aq.clock.now()}
    )
    key = slot_key(state.spec.name, slot)
    item = Item(
        payload=new.model_dump_json().encode(),
        kind=SCHEDULE_KIND,
        encoding="json",
        reference=state.spec.name,
        dedup_key=key,
    )
    depends = (
        [] if current is None else [Ref(SCHEDULES_QUEUE, current.item.id, current.item.version)]
    )
    try:
        await aq.transact(depends=depends, produce={SCHEDULES_QUEUE: [item]})
    except Conflict:
        return False
    stored = (await aq.lookup(SCHEDULES_QUEUE, [key])).get(key)
    won = stored is not None and (got := _decode(stored)) is not None and got.token == new.token
    if won and current is not None:
        await _delete(aq, current.item)
    return won


async def remove(aq: AsyncQueueClient, current: Stored) -> None:
    """Delete the schedule's records (both slots)."""
    await _delete(aq, current.item)
    if current.stale is not None:
        await _delete(aq, current.stale)


async def _delete(aq: AsyncQueueClient, item: StoredItem) -> None:
    with contextlib.suppress(Conflict):  # already gone
        await aq.delete_items(SCHEDULES_QUEUE, [item.id])
