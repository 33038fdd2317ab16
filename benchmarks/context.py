"""The state of one run: profile, chosen systems, their databases, the log."""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from benchmarks.config import Profile
from benchmarks.fleet import Fleet, Unsupported
from benchmarks.pg import throwaway_database
from benchmarks.results import Measurement
from benchmarks.systems import QUERATOR_ASYNC, QUEUES, System


@dataclass
class Bench:
    """What every scenario gets: sizes, systems, databases, and where results go."""

    profile: Profile
    systems: list[System]
    measurements: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _databases: dict[str, str] = field(default_factory=dict)
    _names: Iterator[int] = field(default_factory=itertools.count)
    _installed: set[str] = field(default_factory=set)

    @property
    def queues(self) -> list[System]:
        """The chosen lease-queue systems (every scenario but the workflow one)."""
        return [s for s in self.systems if s.name in QUEUES]

    @property
    def throughput_systems(self) -> list[System]:
        """The queue systems plus querator's async variant (produce and drain)."""
        return self.queues + [s for s in self.systems if s is QUERATOR_ASYNC]

    def log(self, message: str) -> None:
        """Progress on stderr (the table goes to stdout)."""
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        """A remark that belongs in the results (a skipped cell, a substitution)."""
        self.log(message)
        self.notes.append(message)

    def database(self, system: System) -> str:
        """The throwaway database of ``system`` for this run (created once)."""
        dsn = self._databases.get(system.name)
        if dsn is None:
            dsn = self._stack.enter_context(throwaway_database(system.name))
            self._databases[system.name] = dsn
        return dsn

    def fresh_database(self, system: System) -> contextlib.AbstractContextManager[str]:
        """A database of ``system`` for one scenario only (dropped at the end of the block)."""
        return throwaway_database(system.name)

    @contextlib.contextmanager
    def fleet(self, system: System, count: int, dsn: str | None = None) -> Iterator[Fleet]:
        """``count`` agents of ``system`` on ``dsn`` (default: its run database); the
        first fleet on a database installs the system's tables there."""
        dsn = dsn or self.database(system)
        with Fleet(system.name, dsn, count) as fleet:
            if dsn not in self._installed:
                fleet.call_one("install")
                self._installed.add(dsn)
            yield fleet

    def queue_name(self) -> str:
        """A queue name never used before in this run."""
        return f"bench{next(self._names)}"

    def add(self, measurement: Measurement) -> None:
        """Record a measurement and show it."""
        self.measurements.append(measurement)
        shown = ", ".join(f"{v:,.4g}" for v in measurement.values)
        self.log(
            f"  {measurement.scenario} | {measurement.case} | {measurement.system}: "
            f"{measurement.value:,.4g} {measurement.metric}  [{shown}]"
        )

    def guarded(self, what: str, action: Callable[[], None]) -> None:
        """Run one system's part of a scenario; a failure is noted, not fatal."""
        try:
            action()
        except Unsupported as exc:
            self.note(f"{what}: skipped ({exc})")
        except Exception as exc:
            self.note(f"{what}: FAILED: {exc}")

    def sized(self, warm_rate: float, limit: int) -> int:
        """Items per repetition: about ``target_seconds`` of work at the warm-up rate,
        at least 200, at most ``limit``."""
        wanted = int(warm_rate * self.profile.target_seconds)
        return min(limit, max(200, wanted))

    def close(self) -> None:
        """Drop every database of the run."""
        self._stack.close()
