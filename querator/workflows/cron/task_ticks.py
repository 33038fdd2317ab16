"""Cron schedules of tasks: each tick defers the task exactly once.

A workflow's tick is exactly-once by its run id (derived from the tick's key)
and the run's record, which outlives the run. A task keeps no record, and its
item's dedup key lasts only while the item exists: a scheduler that fired a
tick late (it read the schedule before another recorded the tick) could defer
it again after the first item ran. So each tick has a **mark**, an item of
:data:`TICKS_QUEUE` keyed by the tick, produced ``due`` by whoever fires the
tick first, then claimed in one transaction that deletes the ``due`` mark at
its version (``transact(delete=...)``), produces the ``fired`` mark under the
same key and produces the task's item. Two schedulers claiming one mark: one
transaction wins, the other's delete finds the mark gone and changes nothing;
a later one finds it ``fired``. Marks expire after :data:`TICK_RETENTION`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from querator.errors import Conflict, QueueNotFound, Unavailable
from querator.queue.models import DEFAULT_EXPIRE_TIMEOUT, Item, QueueSettings, Ref
from querator.queue.service import AsyncQueueClient
from querator.tasks.deferring import ensure_task_queue
from querator.tasks.layout import ENCODING, dedup_key, task_id_for, task_kind
from querator.workflows.cron.schedules import ScheduleSpec

__all__ = ["TICKS_QUEUE", "fire_task", "task_pending"]

TICKS_QUEUE = "querator.schedule-ticks"
"""Where the marks of task schedules' ticks live (never leased)."""
TICK_RETENTION = DEFAULT_EXPIRE_TIMEOUT
"""Seconds a tick's mark is kept (7 days): longer than any catch-up looks back."""
TICKS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=TICK_RETENTION)
TICK_KIND = "querator.schedule-tick"
DUE, FIRED = b"due", b"fired"
CLAIM_ATTEMPTS = 20


def tick_args(spec: ScheduleSpec, tick: datetime) -> str:
    """The arguments of the call a tick makes (with the tick when the function
    takes one)."""
    if not spec.pass_tick:
        return spec.args
    encoded = json.loads(spec.args)
    encoded["tick"] = tick.astimezone(UTC).isoformat()
    return json.dumps(encoded, separators=(",", ":"))


def _task_item(spec: ScheduleSpec, tick: datetime, task_id: str, due: datetime | None) -> Item:
    return Item(
        payload=tick_args(spec, tick).encode(),
        kind=task_kind(spec.workflow),
        encoding=ENCODING,
        reference=task_id,
        enqueue_at=due,
        dedup_key=dedup_key(task_id),
    )


async def fire_task(
    aq: AsyncQueueClient, spec: ScheduleSpec, tick: datetime, key: str, delay: float = 0.0
) -> str:
    """Defer the task of ``spec`` for ``tick`` unless the tick (its ``key``) was
    fired already; the task id (the same whoever fires it)."""
    task_id = task_id_for(spec.workflow, key)
    mark = f"tick/{key}"
    await aq.create_queue(TICKS_QUEUE, TICKS_SETTINGS, exist_ok=True)
    await ensure_task_queue(aq, spec.queue)
    due = aq.clock.now() + timedelta(seconds=delay) if delay > 0 else None
    quiet = [TICKS_QUEUE]
    for _ in range(CLAIM_ATTEMPTS):
        noted = Item(payload=DUE, kind=TICK_KIND, reference=task_id, dedup_key=mark)
        result = await aq.commit(
            produce={TICKS_QUEUE: [noted]}, lookup={TICKS_QUEUE: [mark]}, silent=quiet
        )
        found = result.found.get(TICKS_QUEUE, {}).get(mark)
        if found is None:
            continue  # expired (or was claimed) between produce and lookup: again
        if found.payload == FIRED:
            return task_id
        fired = Item(payload=FIRED, kind=TICK_KIND, reference=task_id, dedup_key=mark)
        try:
            await aq.commit(
                delete=[Ref(TICKS_QUEUE, found.id, found.version)],
                produce={TICKS_QUEUE: [fired], spec.queue: [_task_item(spec, tick, task_id, due)]},
                silent=quiet,
            )
        except Conflict:
            continue  # another scheduler claimed it: look again
        return task_id
    raise Unavailable(f"schedule {spec.name}: tick {key} kept changing; try again")


async def task_pending(aq: AsyncQueueClient, spec: ScheduleSpec, task_id: str | None) -> bool:
    """Whether the task deferred by the schedule's last tick is still waiting or
    running (its item still exists)."""
    if task_id is None:
        return False
    try:
        return bool(await aq.lookup(spec.queue, [dedup_key(task_id)]))
    except QueueNotFound:
        return False
