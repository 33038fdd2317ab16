"""What a benchmark run measures: the database to use and the sizes of each scenario."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

DEFAULT_DSN = "postgresql://root@127.0.0.1:5432/test"
"""The server the benchmarks use; override with ``QUERATOR_BENCH_DSN``."""
PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"
"""pgbench from the PostgreSQL packages: the database's own ceiling."""
DB_PREFIX = "qbench_"
"""Every throwaway database of a run starts with this (and is dropped at its end)."""
_PREFIX_TAIL = re.compile(r"[a-z0-9_]{0,20}")


def db_prefix() -> str:
    """The prefix of this run's throwaway databases: ``QUERATOR_BENCH_DB_PREFIX``
    (which must start with ``qbench_``; a test keeps its own apart) or ``qbench_``."""
    prefix = os.environ.get("QUERATOR_BENCH_DB_PREFIX", DB_PREFIX)
    if not prefix.startswith(DB_PREFIX) or not _PREFIX_TAIL.fullmatch(prefix[len(DB_PREFIX) :]):
        raise ValueError(
            f"QUERATOR_BENCH_DB_PREFIX must be {DB_PREFIX!r} and up to 20 of [a-z0-9_], "
            f"got {prefix!r}"
        )
    return prefix


def server_dsn() -> str:
    """The DSN of the database used to create and drop throwaway databases."""
    return os.environ.get("QUERATOR_BENCH_DSN", DEFAULT_DSN)


@dataclass(frozen=True, slots=True)
class Profile:
    """Sizes and durations of one run (``full`` or ``quick``)."""

    name: str
    produce_items: int
    """Items produced per repetition of scenario 1 (at most; see ``target_seconds``)."""
    drain_items: int
    """Items drained per repetition of scenarios 2 and 6 (at most)."""
    target_seconds: float
    """A repetition is sized from the warm-up rate to last about this long."""
    repetitions: int
    """Timed repetitions per case; the table shows their median."""
    batches: tuple[int, ...] = (1, 10, 100)
    consumers: tuple[int, ...] = (1, 4)
    e2e_seconds: float = 5.0
    """Length of each end-to-end window (the first second is warm-up)."""
    paced_rate: float = 100.0
    """Items per second offered in the paced latency run."""
    idle_seconds: float = 30.0
    """Length of the idle-cost measurement window."""
    idle_consumers: int = 10
    idle_settle: float = 3.0
    """Seconds idle consumers get to start and reach their waiting state before counting."""
    idle_together: bool = False
    """Measure every system's idle consumers in the same window (each in its own
    database, so the counts stay apart): faster, used by --quick."""
    backlogs: tuple[int, ...] = (1_000, 1_000_000)
    latency_samples: int = 300
    """Timed leases per backlog size."""
    partition_counts: tuple[int, ...] = (1, 8)
    pgbench_seconds: int = 5
    workflows: int = 2_000
    """DBOS workflows started per repetition (at most; see ``target_seconds``)."""
    step_loop_sizes: tuple[int, ...] = (10, 100, 1_000, 10_000)
    """Steps in the loop of the ``step_loop`` runs, one run each (the first is the base)."""
    step_loop_base_runs: int = 20
    """Runs at the smallest size, averaged: the base the other sizes are compared with."""
    step_loop_timeout: float = 600.0
    """Seconds one ``step_loop`` run may take; then it is cancelled and larger sizes skipped."""
    parked_runs: int = 1_000
    """Runs parked on a durable sleep in the ``parked`` scenario."""
    parked_timeout: float = 300.0
    """Seconds the ``parked`` runs may take to reach their sleep."""
    listing_sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    """Runs stored when the ``run_listing`` pages are timed (the first is the base)."""
    attribute_sizes: tuple[int, ...] = (10_000, 1_000_000)
    """Runs stored when the ``attribute_search`` pages are timed (the first is the base)."""
    retention_runs: int = 200_000
    """Finished runs past retention stored (and purged) in the ``retention_drain`` scenario."""
    lock_seconds: float = 3.0
    """Length of each acquire + release window of the ``locks`` scenario."""
    recv_samples: int = 200
    """send -> recv wake latencies timed in the ``messages`` scenario (one run each)."""
    recv_runs: int = 10_000
    """Runs left waiting in ``recv`` on one worker process in the ``messages`` scenario."""
    recv_window: float = 30.0
    """Seconds the statements of those waiting runs are counted."""
    recv_timeout: float = 600.0
    """Seconds the waiting runs may take to reach their ``recv``."""
    lock_contenders: int = 8
    """Processes contending for a semaphore of 2 in the ``locks`` scenario."""


FULL = Profile(
    name="full",
    produce_items=20_000,
    drain_items=20_000,
    target_seconds=2.0,
    repetitions=3,
    e2e_seconds=4.0,
    pgbench_seconds=3,
)
QUICK = Profile(
    name="quick",
    produce_items=5_000,
    drain_items=20_000,
    target_seconds=0.5,
    repetitions=1,
    consumers=(4,),
    e2e_seconds=2.0,
    idle_seconds=5.0,
    idle_settle=2.0,
    idle_together=True,
    backlogs=(1_000, 50_000),
    latency_samples=100,
    pgbench_seconds=1,
    workflows=100,
    step_loop_sizes=(10, 100, 1_000),
    listing_sizes=(1_000, 10_000),
    attribute_sizes=(1_000, 10_000),
    retention_runs=20_000,
    recv_samples=100,
    recv_window=10.0,
)
TINY = Profile(
    name="tiny",
    produce_items=200,
    drain_items=200,
    target_seconds=0.2,
    repetitions=1,
    batches=(10,),
    consumers=(2,),
    e2e_seconds=1.5,
    paced_rate=50.0,
    idle_seconds=1.0,
    idle_settle=1.0,
    idle_together=True,
    idle_consumers=2,
    backlogs=(100, 1_000),
    latency_samples=20,
    pgbench_seconds=1,
    workflows=20,
    step_loop_sizes=(10, 50),
    step_loop_base_runs=3,
    step_loop_timeout=60.0,
    parked_runs=20,
    parked_timeout=60.0,
    listing_sizes=(50, 200),
    attribute_sizes=(200, 1_000),
    retention_runs=300,
    lock_seconds=0.5,
    lock_contenders=3,
    recv_samples=5,
    recv_runs=20,
    recv_window=1.0,
    recv_timeout=60.0,
)
"""For the smoke test: every code path, on almost no data."""

PROFILES = {p.name: p for p in (FULL, QUICK, TINY)}
