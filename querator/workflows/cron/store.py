"""Where schedules live: one record per schedule in ``querator.schedules``.

Each schedule is a record of the two-slot compare-and-set store
(:mod:`querator.queue.record_store`), keyed ``schedule/{name}/a`` and
``…/b``. Schedulers use it for their bookkeeping: a write that loses reads
again next pass; the runs themselves are exactly-once by their idempotency
key, whoever wins.
"""

from __future__ import annotations

import logging

from querator.queue.models import QueueSettings
from querator.queue.record_store import RecordStore
from querator.queue.record_store import Stored as StoredRecord
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION
from querator.workflows.cron.schedules import ScheduleState

__all__ = ["SCHEDULES_QUEUE", "Stored", "read_all", "read_one", "remove", "write"]

log = logging.getLogger("querator.schedules")

SCHEDULES_QUEUE = "querator.schedules"
SCHEDULES_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
SCHEDULE_KIND = "querator.schedule"

SCHEDULES = RecordStore(
    SCHEDULES_QUEUE,
    ScheduleState,
    kind=SCHEDULE_KIND,
    prefix="schedule/",
    settings=SCHEDULES_SETTINGS,
    logger=log,
)
"""The schedules' records, named by schedule."""

Stored = StoredRecord[ScheduleState]
"""The current record of a schedule and the item holding it."""


async def read_one(aq: AsyncQueueClient, name: str) -> Stored | None:
    """The current record of schedule ``name`` (None: no such schedule)."""
    await SCHEDULES.ensure(aq)
    return await SCHEDULES.read(aq, name)


async def read_all(aq: AsyncQueueClient, told: set[str] | None = None) -> list[Stored]:
    """Every schedule's current record, by name (none while no schedule was ever
    written: a scheduler's pass over an empty store creates nothing). A damaged
    record is skipped, said at ERROR once per item id in ``told`` (every time
    without)."""
    return await SCHEDULES.read_all(aq, told)


async def write(aq: AsyncQueueClient, current: Stored | None, state: ScheduleState) -> bool:
    """Replace ``current`` (None: create) with ``state``; True if this write won.

    False means another writer changed the schedule first (read it again).
    """
    await SCHEDULES.ensure(aq)
    stamped = state.model_copy(update={"updated_at": aq.clock.now()})
    return await SCHEDULES.write(aq, state.spec.name, current, stamped) is not None


async def remove(aq: AsyncQueueClient, current: Stored) -> None:
    """Delete the schedule's records (both slots)."""
    await SCHEDULES.remove(aq, current)
