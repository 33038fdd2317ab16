"""Throughput of the queues: what went into each queue and out of it, per
sampling interval, drawn as the queues page's sparklines.

The queue layer keeps no history (a completed item is deleted), so the
server samples: one :class:`Sampler` per ``querator serve`` reads, every
:data:`INTERVAL` seconds, the gauges of the queues of the list's first page
(:meth:`AsyncQuerator.gauges`: bounded probes, plus each partition's
``produced`` counter, the seqs it handed out, read in O(1)) and keeps the last
:data:`BARS` samples in memory. Between two samples, *in* is what the counter
grew by and *out* (completed, dead-lettered, expired, purged) is *in* minus
what the depth grew by. Pages read the samples from memory: however many
browsers look, the store sees one round of gauges per interval.

*Out* needs exact depths at both samples: a queue deeper than the gauges'
limit has its *in* drawn only. History starts when the server starts.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
from collections import deque
from dataclasses import dataclass
from datetime import datetime

import anyio

from querator.errors import QueratorError, QueueNotFound
from querator.queue.service import AsyncQueueClient

INTERVAL = 30.0
"""Seconds between two samples (by default)."""
INTERVAL_ENV = "QUERATOR_THROUGHPUT_INTERVAL"
"""The environment variable that sets another interval (seconds, 0.1 to 3600)."""
BARS = 40
"""Intervals a sparkline draws (20 minutes by default)."""
QUEUES = 200
"""Queues sampled at most: the queues list's first page, by name."""

log = logging.getLogger(__name__)


def interval_from_env() -> float:
    """The interval :data:`INTERVAL_ENV` names, else :data:`INTERVAL` (a value
    that is not a number of seconds in range is logged and ignored)."""
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return INTERVAL
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0.1 <= seconds <= 3600:
        log.warning("%s=%r is not 0.1 to 3600 seconds: using %s", INTERVAL_ENV, text, INTERVAL)
        return INTERVAL
    return seconds


@dataclass(frozen=True)
class Sample:
    """One queue's counters at one instant."""

    at: datetime
    produced: int | None
    depth: int
    exact: bool


@dataclass(frozen=True)
class Bar:
    """One interval of a queue's throughput."""

    end: datetime
    """When the interval's closing sample was taken."""
    went_in: int | None
    """Items produced during the interval; None when unknown (a reset counter)."""
    went_out: int | None
    """Items that left during the interval; None when a depth was not exact."""


@dataclass(frozen=True)
class Line:
    """A queue's throughput over the sampled intervals, oldest first."""

    bars: list[Bar]
    interval: float
    """Seconds between samples."""

    @property
    def peak(self) -> int:
        """The largest bar (at least 1: the scale of the bars)."""
        return max([1, *(b.went_in or 0 for b in self.bars), *(b.went_out or 0 for b in self.bars)])

    @property
    def went_in(self) -> int:
        """Items produced over the line."""
        return sum(b.went_in or 0 for b in self.bars)

    @property
    def went_out(self) -> int | None:
        """Items that left over the line; None when no interval says."""
        known = [b.went_out for b in self.bars if b.went_out is not None]
        return sum(known) if known else None

    @property
    def span(self) -> float:
        """Seconds the line spans."""
        return len(self.bars) * self.interval

    @property
    def room(self) -> int:
        """Bars a sparkline has room for: the newest is drawn at the right end."""
        return BARS


def _bar(before: Sample, after: Sample) -> Bar:
    went_in = None
    if before.produced is not None and after.produced is not None:
        grew = after.produced - before.produced
        went_in = grew if grew >= 0 else None  # the queue was made anew
    went_out = None
    if went_in is not None and before.exact and after.exact:
        went_out = max(0, went_in - (after.depth - before.depth))
    return Bar(after.at, went_in, went_out)


class Sampler:
    """The server's one reader of the queues' counters (see the module's docstring)."""

    def __init__(self, aq: AsyncQueueClient, interval: float = INTERVAL) -> None:
        self._aq = aq
        self.interval = interval
        self._samples: dict[str, deque[Sample]] = {}

    async def run(self) -> None:
        """Sample every :attr:`interval` seconds until cancelled; a round that
        fails is logged, and the next round tries again (it runs in the
        server's lifespan: an error here must not stop the server)."""
        while True:
            try:
                await self.sample()
            except QueratorError as exc:
                log.warning("throughput: sampling the queues failed: %s", exc)
            except Exception:  # a sparkline never takes the server down with it
                log.exception("throughput: sampling the queues failed")
            await anyio.sleep(self.interval)

    async def sample(self) -> None:
        """Read the counters of the first :data:`QUEUES` queues once."""
        infos = await self._aq.list_queues(limit=QUEUES)
        names = {info.name for info in infos}
        for gone in set(self._samples) - names:
            del self._samples[gone]
        for info in infos:
            with contextlib.suppress(QueueNotFound):  # deleted meanwhile
                gauges = await self._aq.gauges(info.name)
                kept = self._samples.setdefault(info.name, deque(maxlen=BARS + 1))
                now = self._aq.clock.now()
                kept.append(Sample(now, gauges.produced, gauges.depth, gauges.exact))

    def line(self, queue: str) -> Line | None:
        """The throughput of ``queue`` (None before two samples of it were taken)."""
        kept = list(self._samples.get(queue, ()))
        if len(kept) < 2:
            return None
        return Line([_bar(a, b) for a, b in itertools.pairwise(kept)], self.interval)
