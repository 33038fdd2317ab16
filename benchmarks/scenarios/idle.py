"""Scenario 4: what waiting consumers cost the database when there is no work.

``idle_consumers`` consumer processes wait on an empty queue as each system's
documentation runs them (querator: ``lease(timeout=30)`` in a loop; PgQueuer:
``QueueManager.run``; Procrastinate: a worker; the plain loop: LISTEN plus a
look every 30 s). After a settling period the harness counts, over
``idle_seconds``, the statements the system's database receives.

Method: pg_stat_statements is not preloaded on the server, so the count comes
from the server log: each system's throwaway database gets ``log_statement =
'all'`` for new sessions, and the harness counts that database's
``statement:``/``execute`` lines between two offsets of the log file. When the
log cannot be read, the count falls back to transactions (``pg_stat_database``
xact_commit + xact_rollback deltas; a multi-statement transaction counts once,
and backends flush these counters up to ~1 s late).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from functools import partial

from benchmarks import pg
from benchmarks.context import Bench
from benchmarks.fleet import Fleet
from benchmarks.results import Measurement
from benchmarks.systems import System


@dataclass
class _Watch:
    """One system's idle fleet and its database."""

    system: System
    database: str
    fleet: Fleet
    queue: str
    waiting: list[int]
    start_xact: int = 0
    end_xact: int = 0


def run(bench: Bench) -> None:
    """Statements per second per idle consumer, for every system."""
    log_path = pg.server_log_path()
    method = "server log (log_statement=all)" if log_path else "pg_stat_database transactions"
    bench.note(f"idle: counting statements from the {method}")
    groups = [bench.queues] if bench.profile.idle_together else [[s] for s in bench.queues]
    for group in groups:
        names = "+".join(s.name for s in group)
        bench.guarded(f"idle/{names}", partial(_measure, bench, group, log_path))


def _offset(path: str | None) -> int:
    return os.path.getsize(path) if path else 0


def _measure(bench: Bench, systems: list[System], log_path: str | None) -> None:
    profile = bench.profile
    window = profile.idle_seconds
    with contextlib.ExitStack() as stack:
        watches = []
        for system in systems:
            dsn = bench.database(system)
            database = pg.database_of(dsn)
            pg.log_statements(database, on=log_path is not None)
            fleet = stack.enter_context(bench.fleet(system, profile.idle_consumers, dsn))
            queue = bench.queue_name()
            fleet.call_one("reset", queue=queue)
            watches.append(_Watch(system, database, fleet, queue, []))
        for watch in watches:
            watch.waiting = watch.fleet.start(
                "idle", queue=watch.queue, seconds=profile.idle_settle + window + 1.0
            )
        time.sleep(profile.idle_settle)
        start_log = _offset(log_path)
        for watch in watches:
            watch.start_xact = pg.transactions(watch.database)
        time.sleep(window)
        end_log = _offset(log_path)
        for watch in watches:
            watch.end_xact = pg.transactions(watch.database)
        for watch in watches:
            watch.fleet.collect(watch.waiting)
            pg.log_statements(watch.database, on=False)
    for watch in watches:
        _record(bench, watch, log_path, start_log, end_log)


def _record(bench: Bench, watch: _Watch, log_path: str | None, start: int, end: int) -> None:
    profile = bench.profile
    consumers, window = profile.idle_consumers, profile.idle_seconds
    xacts = (watch.end_xact - watch.start_xact) / window / consumers
    if log_path:
        count = pg.count_logged_statements(log_path, watch.database, start, end)
        value, how = count / window / consumers, "server log"
    else:
        value, how = xacts, "transactions"
    bench.add(
        Measurement(
            "idle",
            f"{consumers} consumers waiting on an empty queue",
            watch.system.name,
            "statements/s per consumer",
            "lower",
            [value],
            {"method": how, "transactions_per_s_per_consumer": xacts, "window_s": window},
        )
    )
