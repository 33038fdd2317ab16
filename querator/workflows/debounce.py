"""Debounced starts: one run after the last call of a burst, with its arguments.

A burst of ``start(..., debounce=Debounce(key, delay))`` calls keeps one
*window* per (workflow, key) in the ``querator.debounce`` queue, as the
two-slot compare-and-set of :mod:`querator.queue.record_store`: each call
writes the next generation (the call's arguments, the due time pushed back to
``now + delay``, capped at ``first call + max_delay``) into the other slot
with ``depends`` on the current one, so concurrent callers serialise and the
last write wins. Every call of one window gets the same run id, fixed when
the window opens. A call that read the window as absent may find, once it has
written, a newer generation of a window opened meanwhile (its first slot was
free again): it deletes its own and joins that one.

:func:`start_due` leases windows that came due and, in one transaction,
completes the window and stores the run (its meta and first wake): a worker
killed at any instant leaves either the window (leased again after its lease)
or the run, never both and never two runs. A left-over older generation is
discarded when leased (the run exists, or a newer generation does).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio
from pydantic import BaseModel, ConfigDict

from querator.errors import (
    Conflict,
    InvalidArgument,
    QueueNotFound,
    RequestTimeout,
    Unavailable,
)
from querator.queue.models import Item, Leased, Ref, StoredItem
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.workflows.engine.commit import ensure_work_queue, transact_creating
from querator.workflows.keys import RESULTS_QUEUE, meta_key, new_run_id
from querator.workflows.stored import RunMeta, start_items

__all__ = [
    "DEBOUNCE_QUEUE",
    "MAX_DEBOUNCE_KEY",
    "Debounce",
    "debounced_start",
    "run_debouncer",
    "start_due",
]

log = logging.getLogger("querator.debounce")

DEBOUNCE_QUEUE = "querator.debounce"
"""The queue holding the open debounce windows."""
MAX_DEBOUNCE_KEY = 256
"""Characters a debounce key may have."""
_SLOTS = ("a", "b")


@dataclass(frozen=True, slots=True)
class Debounce:
    """Start one run after a burst of calls with the same ``key`` goes quiet.

    ``delay`` (seconds): the run starts that long after the last call of the
    burst, with the last call's arguments. ``max_delay`` (seconds, default
    ``10 * delay``): the run starts no later than that after the burst's first
    call, so a never-ending burst still starts runs.
    """

    key: str
    """What groups calls into one burst (with the workflow's name)."""
    delay: float
    """Quiet time after the last call before the run starts."""
    max_delay: float | None = None
    """Longest wait after the burst's first call (``None``: ``10 * delay``)."""

    def __post_init__(self) -> None:
        key = self.key
        if not isinstance(key, str) or not key:
            raise InvalidArgument("debounce.key", "must be a non-empty string")
        if len(key) > MAX_DEBOUNCE_KEY:
            raise InvalidArgument("debounce.key", f"must be at most {MAX_DEBOUNCE_KEY} characters")
        if any(unicodedata.category(c) == "Cc" for c in key):
            raise InvalidArgument("debounce.key", "must not contain control characters")
        check_duration("debounce.delay", self.delay)
        if self.max_delay is not None:
            check_duration("debounce.max_delay", self.max_delay)
            if self.max_delay < self.delay:
                raise InvalidArgument("debounce.max_delay", "must be >= delay")

    @property
    def longest(self) -> float:
        """The effective ``max_delay`` in seconds."""
        return self.max_delay if self.max_delay is not None else 10 * self.delay


class _Window(BaseModel):
    """One generation of a debounce window, as the item's payload."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    gen: int
    token: str
    run_id: str
    first_at: datetime
    meta: RunMeta


def _base(workflow: str, key: str) -> str:
    digest = hashlib.sha256(f"{workflow}\n{key}".encode()).hexdigest()[:40]
    return f"debounce-{digest}-"


def _decode(item: StoredItem) -> _Window | None:
    try:
        return _Window.model_validate_json(item.payload)
    except ValueError:
        return None


async def _read(aq: AsyncQueueClient, base: str) -> list[tuple[StoredItem, _Window]]:
    """The window's generations, newest first."""
    try:
        found = await aq.lookup(DEBOUNCE_QUEUE, [base + s for s in _SLOTS])
    except QueueNotFound:
        return []
    pairs = [(item, w) for item in found.values() if (w := _decode(item)) is not None]
    return sorted(pairs, key=lambda p: -p[1].gen)


async def debounced_start(aq: AsyncQueueClient, meta: RunMeta, debounce: Debounce) -> str:
    """Record this call in its window (opening one if none is open); the run id.

    Every call of one window returns the same run id; the run starts
    ``delay`` after the window's last call with that call's ``meta``.
    """
    base = _base(meta.workflow, debounce.key)
    while True:
        pairs = await _read(aq, base)
        now = aq.clock.now()
        current = pairs[0] if pairs else None
        if current is not None and _held(current[0], now):
            await anyio.sleep(0.02)  # the window is being started: the next one opens after
            continue
        if len(pairs) > 1:  # a writer stopped before deleting the older generation
            await _discard(aq, pairs[1][0])
            continue
        if current is None:
            gen, run_id, first, slot, depends = 1, new_run_id(None), now, _SLOTS[0], []
        else:
            item, win = current
            gen, run_id, first = win.gen + 1, win.run_id, win.first_at
            slot = _SLOTS[1] if item.dedup_key == base + _SLOTS[0] else _SLOTS[0]
            depends = [Ref(DEBOUNCE_QUEUE, item.id, item.version)]
        latest = first + timedelta(seconds=debounce.longest)
        due = min(now + timedelta(seconds=debounce.delay), latest)
        token = secrets.token_hex(8)
        window = _Window(gen=gen, token=token, run_id=run_id, first_at=first, meta=meta)
        produced = Item(
            payload=window.model_dump_json().encode(),
            kind="debounce",
            reference=run_id,
            dedup_key=base + slot,
            enqueue_at=due,
        )
        try:
            if depends:
                await aq.transact(depends=depends, produce={DEBOUNCE_QUEUE: [produced]})
            else:
                await transact_creating(aq, [], {DEBOUNCE_QUEUE: [produced]})
        except Conflict:
            continue
        found = await _read(aq, base)
        mine = [item for item, w in found if w.token == token]
        if not mine:
            continue  # another caller filled the slot first: try again on top of theirs
        if found[0][1].run_id != run_id:
            # Read as absent, the window opened and moved on to its other slot
            # before this call filled the free one: this window is an orphan.
            await _discard(aq, mine[0])
            continue
        if current is not None:
            await _discard(aq, current[0])
        return run_id


async def _lookup_run(aq: AsyncQueueClient, run_id: str) -> dict[str, StoredItem]:
    try:
        return await aq.lookup(RESULTS_QUEUE, [meta_key(run_id)])
    except QueueNotFound:
        return {}  # the first run of this store


def _held(item: StoredItem, now: datetime) -> bool:
    return item.lease_deadline is not None and item.lease_deadline > now


async def _discard(aq: AsyncQueueClient, item: StoredItem) -> None:
    """Delete an older generation (gone already, or leased: its worker drops it)."""
    with contextlib.suppress(Conflict, QueueNotFound):
        await aq.delete_items(DEBOUNCE_QUEUE, [item.id])


async def run_debouncer(aq: AsyncQueueClient, client_id: str, poll_timeout: float = 5.0) -> None:
    """Start debounced runs as their windows come due, until cancelled (every
    workflow worker runs this; any number may, each window is started once)."""
    await ensure_work_queue(aq, DEBOUNCE_QUEUE)
    outage, backoff = Outage(log, "debouncer"), Backoff(initial=0.2)
    while True:
        try:
            await start_due(aq, client_id, timeout=poll_timeout)
        except Unavailable as exc:
            outage.lost(exc)  # once per outage; retried with backoff
            await anyio.sleep(backoff.next())
        except Exception:
            log.exception("debouncer pass failed; retrying")
            await anyio.sleep(1.0)
        else:
            outage.back()
            backoff.reset()


async def start_due(
    aq: AsyncQueueClient, client_id: str, batch_size: int = 16, timeout: float = 0.0
) -> int:
    """Start the runs of the windows that came due (waiting up to ``timeout``
    seconds for one); how many were started."""
    try:
        leased = await aq.lease(
            DEBOUNCE_QUEUE, client_id=client_id, batch_size=batch_size, timeout=timeout
        )
    except (QueueNotFound, RequestTimeout):
        return 0  # no window is due
    started = 0
    for item in leased:
        started += await _start_one(aq, item)
    return started


async def _start_one(aq: AsyncQueueClient, item: Leased) -> int:
    window = _decode(item)
    if window is None or item.dedup_key is None:
        await aq.complete(DEBOUNCE_QUEUE, [item])
        return 0
    base = item.dedup_key[:-1]
    newer = [w for _, w in await _read(aq, base) if w.gen > window.gen]
    exists = {} if newer else await _lookup_run(aq, window.run_id)
    if newer or exists:
        await aq.complete(DEBOUNCE_QUEUE, [item])  # a stale generation
        return 0
    meta = window.meta
    now = aq.clock.now()
    if meta.deadline is not None:
        span = (meta.deadline - meta.started_at).total_seconds()
        meta = meta.model_copy(update={"deadline": now + timedelta(seconds=span)})
    meta = meta.model_copy(update={"started_at": now})
    try:
        await transact_creating(aq, [item], start_items(window.run_id, meta))
    except Conflict:
        return 0  # the lease was lost: whoever holds it now starts the run
    return 1
