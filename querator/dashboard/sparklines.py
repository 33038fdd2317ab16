"""Sparklines of the runs page: runs started per hour over the last day, by
outcome (completed, failed), for every workflow or the one filtered on.

They are read from the run index (:mod:`querator.workflows.run_index`): one
key scan per outcome of at most :data:`READ` entries, newest first, whose
keys carry the runs' start times — never a count of the table. A day with
more runs than that shows its newest hours only (the older bars are left
out, and the page says so). A ``failed`` entry of a run resumed since may
still be counted until a runs page prunes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio

from querator.errors import QueueNotFound
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.run_index import entry_started_at, facet_prefix, since_bound

READ = 500
"""Index entries read per outcome (one scan)."""
HOURS = 24
"""Bars of a sparkline: one an hour."""
OUTCOMES = ("completed", "failed")


@dataclass(frozen=True)
class Bar:
    """One hour of a sparkline."""

    start: datetime
    count: int | None
    """Runs started in the hour; None when the scan stopped before it."""


@dataclass(frozen=True)
class Sparkline:
    """One outcome's runs per hour, oldest hour first."""

    outcome: str
    bars: list[Bar]
    total: int
    cut: bool
    """True when :data:`READ` entries were read before the day's start."""

    @property
    def peak(self) -> int:
        """The largest hour (at least 1, the scale of the bars)."""
        return max([1, *(bar.count or 0 for bar in self.bars)])


async def _line(
    aq: AsyncQueueClient, workflow: str | None, outcome: str, now: datetime
) -> Sparkline:
    prefix = facet_prefix(workflow, outcome)
    first = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=HOURS - 1)
    bound = since_bound(prefix, first)
    try:
        found = await aq.scan_keys(RESULTS_QUEUE, prefix, limit=READ)
    except QueueNotFound:
        found = []
    keys = [item.dedup_key for item in found if item.dedup_key and item.dedup_key <= bound]
    counts = [0] * HOURS
    oldest: datetime | None = None
    for key in keys:
        started = entry_started_at(key)
        if started is None:
            continue
        oldest = started
        slot = int((started - first).total_seconds() // 3600)
        if 0 <= slot < HOURS:
            counts[slot] += 1
    cut = len(found) >= READ and len(keys) == len(found)
    bars = []
    for hour, count in enumerate(counts):
        start = first + timedelta(hours=hour)
        partial = cut and oldest is not None and start + timedelta(hours=1) <= oldest
        bars.append(Bar(start, None if partial else count))
    return Sparkline(outcome, bars, sum(counts), cut)


async def sparklines(aq: AsyncQueueClient, workflow: str | None) -> list[Sparkline]:
    """The sparklines of the runs of ``workflow`` (None: every workflow)."""
    now = aq.clock.now()
    lines: dict[str, Sparkline] = {}

    async def read(outcome: str) -> None:
        lines[outcome] = await _line(aq, workflow, outcome, now)

    async with anyio.create_task_group() as group:  # the scans at once
        for outcome in OUTCOMES:
            group.start_soon(read, outcome)
    return [lines[outcome] for outcome in OUTCOMES]
