"""What every system under test offers the harness: an Agent in its own process.

An agent is one client of one system (a producer, a consumer, or the admin
that installs and resets). The harness runs each agent in a process of its
own (see :mod:`benchmarks.fleet`), so consumers never share a GIL and each
process's peak RSS is its own. Methods a system cannot do raise
:class:`NotImplementedError`; the scenario then leaves that cell empty.
"""

from __future__ import annotations

import resource
import struct
import time
from dataclasses import dataclass, field

PAYLOAD = struct.Struct("<d")
"""Every item's payload: the wall-clock instant it was produced (8 bytes)."""


def stamp() -> bytes:
    """A payload carrying now."""
    return PAYLOAD.pack(time.time())


def age_of(payload: bytes) -> float:
    """Seconds since the payload was stamped."""
    produced: float = PAYLOAD.unpack_from(payload)[0]
    return time.time() - produced


@dataclass(slots=True)
class Span:
    """A timed piece of work: monotonic start and end (comparable across processes)."""

    start: float
    end: float
    count: int = 0
    peak_rss_kib: int = 0


@dataclass(slots=True)
class Received(Span):
    """What a consumer got: (monotonic receive time, produce-to-lease seconds) per item."""

    samples: list[tuple[float, float]] = field(default_factory=list)


class Deadline:
    """A monotonic deadline."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        """True once the deadline is reached."""
        return time.monotonic() >= self.at


def peak_rss_kib() -> int:
    """Peak resident set size of this process so far, KiB (Linux ru_maxrss)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Agent:
    """One client of a system. Subclasses connect in ``__init__``."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def install(self) -> None:
        """Create the system's tables in the (empty, throwaway) database."""
        raise NotImplementedError

    def reset(self, queue: str, partitions: int = 1) -> None:
        """Make ``queue`` exist and be empty (older benchmark queues may be dropped)."""
        raise NotImplementedError

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        """Produce ``count`` items in batches (``rate`` > 0 paces them; ``seconds`` > 0
        stops at that time even if fewer were produced)."""
        raise NotImplementedError

    def drain(self, queue: str, batch: int) -> Span:
        """Lease and complete until nothing is left, ``batch`` at a time."""
        raise NotImplementedError

    def consume(self, queue: str, batch: int, seconds: float) -> Received:
        """Wait for, lease and complete items for ``seconds``; record latencies."""
        raise NotImplementedError

    def idle(self, queue: str, seconds: float) -> Span:
        """Be a waiting consumer of an empty queue for ``seconds``, as users run one."""
        raise NotImplementedError

    def lease_latency(self, queue: str, samples: int, seconds: float) -> list[float]:
        """Time up to ``samples`` single-item leases (each completed, untimed), for at
        most about ``seconds``."""
        raise NotImplementedError

    def peak_rss(self) -> int:
        """Peak RSS of this agent's process, KiB."""
        return peak_rss_kib()

    def cpu(self) -> float:
        """CPU seconds this agent's process has used (all threads)."""
        return time.process_time()

    def close(self) -> None:
        """Release connections."""
