"""Issue 30: messages to a waiting run, querator next to DBOS 3.4's send/recv.

Two figures per system, on PostgreSQL, in the same run:

- **Wake latency**: a run (workflow) waits in ``recv("ping")`` on an idle
  worker; after ``LATENCY_PAUSE`` the sender sends the wall-clock instant, and
  the body, once ``recv`` returns, computes how long ago that was (sender and
  worker on one machine: one clock). One run per sample; p50 and p99.
  querator: one worker process (a real ``Worker``, default options,
  :mod:`benchmarks.live_flows`), the harness process starts the runs and
  sends (``send``: a transaction, then NOTIFY). DBOS: its runtime runs the
  workflows in the agent process, which sends with ``DBOS.send`` from the
  main thread (DBOS's own layout; its wake goes through the database too: an
  insert whose trigger notifies the process's listener thread).
- **Idle cost of waiting runs**: a fresh worker process (querator) or DBOS
  process, its sessions logging every statement, is first counted serving
  with no run for ``recv_window`` seconds; then ``profile.recv_runs``
  (10,000) runs are left waiting in ``recv`` (an hour) and, once every one
  waits, counted again: the statements per second of that database (the
  server log, as the ``idle`` scenario: pg_stat_statements is not preloaded
  on the benchmark server), its transactions per second (``pg_stat_database``;
  these also count autovacuum's, which the inserts of 10,000 runs set off),
  the worker's RSS growth per waiting run and, for querator, its CPU.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import pg
from benchmarks.context import Bench
from benchmarks.live_flows import recv_wake
from benchmarks.results import Measurement
from benchmarks.scenarios.live_worker import WorkerProcess
from benchmarks.stats import percentile
from benchmarks.systems import DBOS, QUERATOR
from benchmarks.systems.base import Deadline
from querator import Querator
from querator.workflows import send
from querator.workflows.keys import RESULTS_QUEUE, wait_key

SCENARIO = "messages"
LATENCY_PAUSE = 0.05
"""Seconds a run waits in ``recv`` before the send (the worker is back idle)."""
POLL = 0.002
"""Seconds between two looks for a run's wait record (latency samples)."""
RUNS_PER_LOOKUP = 1_000
"""Wait records looked up per call while the waiting runs park."""
SETTLE = 3.0
"""Seconds after the last run waits before the idle window opens."""
METHOD = (
    "statements: the server log (log_statement=all for the worker's sessions); "
    "transactions: pg_stat_database xact_commit + xact_rollback"
)


def run(bench: Bench) -> None:
    """querator and DBOS, whichever are installed and chosen."""
    if QUERATOR in bench.systems:
        bench.guarded("messages/querator", lambda: _measure_querator(bench))
    if DBOS in bench.systems:
        bench.guarded("messages/dbos", lambda: _measure_dbos(bench))


def _latency_rows(bench: Bench, system: str, seconds: list[float]) -> None:
    millis = [s * 1000 for s in seconds if s >= 0]
    if len(millis) < len(seconds):
        raise RuntimeError(f"{len(seconds) - len(millis)} recv(s) timed out instead of waking")
    for label, pct in (("p50", 50.0), ("p99", 99.0)):
        bench.add(
            Measurement(
                SCENARIO,
                "send -> recv returns, idle worker",
                system,
                f"ms latency {label}",
                "lower",
                [percentile(millis, pct)],
                {"samples": len(millis), "pause_s": LATENCY_PAUSE},
            )
        )


def _idle_rows(bench: Bench, system: str, detail: dict[str, Any]) -> None:
    runs = bench.profile.recv_runs
    waiting = f"{runs:,} runs waiting in recv, one worker process"
    rows = [
        ("worker RSS growth per run waiting in recv", "KiB per run", detail["rss_per_run_kib"]),
        ("worker serving, no run", "statements/s", detail["idle_statements_per_s"]),
        (waiting, "statements/s", detail["statements_per_s"]),
        ("worker serving, no run", "transactions/s", detail["idle_xacts_per_s"]),
        (waiting, "transactions/s", detail["xacts_per_s"]),
    ]
    if "cpu_ms_per_s" in detail:
        rows.append((waiting, "worker CPU ms/s", detail["cpu_ms_per_s"]))
    for case, metric, value in rows:
        if value is not None:
            bench.add(Measurement(SCENARIO, case, system, metric, "lower", [value], detail))


class _Window:
    """Statements (server log, when readable) and transactions (pg_stat_database)
    of one database over a window of ``seconds``."""

    def __init__(self, database: str, seconds: float) -> None:
        self.database, self.seconds = database, seconds
        self.log = pg.server_log_path()

    def count(self) -> tuple[float | None, float]:
        """(statements/s or None, transactions/s) over the next window."""
        start = os.path.getsize(self.log) if self.log else 0
        xacts = pg.transactions(self.database)
        time.sleep(self.seconds)
        xacts = pg.transactions(self.database) - xacts
        if self.log is None:
            return None, xacts / self.seconds
        end = os.path.getsize(self.log)
        statements = pg.count_logged_statements(self.log, self.database, start, end)
        return statements / self.seconds, xacts / self.seconds


def _wait_parked(
    q: Querator, run_ids: list[str], deadline: Deadline, worker: WorkerProcess
) -> None:
    """Block until every run has its wait record (``{run}/0/wait``): it waits in recv."""
    pending = run_ids
    while pending:
        left: list[str] = []
        for index in range(0, len(pending), RUNS_PER_LOOKUP):
            chunk = pending[index : index + RUNS_PER_LOOKUP]
            found = q.lookup(RESULTS_QUEUE, [wait_key(r, 0) for r in chunk])
            left += [r for r in chunk if wait_key(r, 0) not in found]
        pending = left
        if not pending:
            return
        worker.check()
        if deadline.passed():
            raise RuntimeError(f"{len(pending):,} of {len(run_ids):,} runs never reached recv")
        time.sleep(0.25 if len(pending) > 1 else POLL)


def _measure_querator(bench: Bench) -> None:
    with (
        bench.fresh_database(QUERATOR) as dsn,
        tempfile.TemporaryDirectory(prefix="qbench-messages-") as work,
        Querator(dsn) as q,
    ):
        with WorkerProcess(dsn, "messages", Path(work) / "latency.log") as worker:
            worker.wait_serving(q)
            _querator_latency(bench, q, worker)
        database = pg.database_of(dsn)
        pg.log_statements(database, on=True)  # for the new worker's sessions
        try:
            with WorkerProcess(dsn, "messages", Path(work) / "idle.log") as worker:
                worker.wait_serving(q)
                detail, code = _querator_idle(bench, q, worker, database)
        finally:
            pg.log_statements(database, on=False)
    _idle_rows(bench, QUERATOR.name, detail)
    if code != 0:
        bench.note(f"messages: the worker's exit status after SIGTERM was {code} (None: killed)")


def _querator_latency(bench: Bench, q: Querator, worker: WorkerProcess) -> None:
    latencies = []
    for _ in range(bench.profile.recv_samples + 2):  # the first two warm up
        handle = q.start(recv_wake)
        _wait_parked(q, [handle.run_id], Deadline(30.0), worker)
        time.sleep(LATENCY_PAUSE)
        send(q, handle.run_id, "ping", time.time())
        latencies.append(float(handle.result(timeout=30)))
    _latency_rows(bench, QUERATOR.name, latencies[2:])


def _querator_idle(
    bench: Bench, q: Querator, worker: WorkerProcess, database: str
) -> tuple[dict[str, Any], int | None]:
    profile = bench.profile
    window = _Window(database, profile.recv_window)
    idle_statements, idle_xacts = window.count()
    before = worker.rss_kib()
    began = time.monotonic()
    run_ids = [q.start(recv_wake).run_id for _ in range(profile.recv_runs)]
    _wait_parked(q, run_ids, Deadline(profile.recv_timeout), worker)
    parked_s = time.monotonic() - began
    time.sleep(SETTLE)
    cpu = worker.cpu_seconds()
    statements, xacts = window.count()
    cpu = worker.cpu_seconds() - cpu
    loaded = worker.rss_kib()
    code, _ = worker.stop()
    detail = {
        "runs": profile.recv_runs,
        "rss_before_kib": before,
        "rss_parked_kib": loaded,
        "rss_per_run_kib": (loaded - before) / profile.recv_runs,
        "idle_statements_per_s": idle_statements,
        "statements_per_s": statements,
        "idle_xacts_per_s": idle_xacts,
        "xacts_per_s": xacts,
        "cpu_ms_per_s": cpu * 1000 / profile.recv_window,
        "window_s": profile.recv_window,
        "seconds_to_park": round(parked_s, 2),
        "method": METHOD,
    }
    return detail, code


def _measure_dbos(bench: Bench) -> None:
    profile = bench.profile
    with bench.fresh_database(DBOS) as dsn:
        with bench.fleet(DBOS, 1, dsn) as fleet:
            samples = profile.recv_samples + 2
            latencies = fleet.call_one("recv_latency", samples=samples, pause=LATENCY_PAUSE)
        _latency_rows(bench, DBOS.name, latencies[2:])
        database = pg.database_of(dsn)
        pg.log_statements(database, on=True)
        try:
            detail = _dbos_idle(bench, dsn, database)
        finally:
            pg.log_statements(database, on=False)
    if detail is not None:
        _idle_rows(bench, DBOS.name, detail)


def _dbos_idle(bench: Bench, dsn: str, database: str) -> dict[str, Any] | None:
    profile = bench.profile
    window = _Window(database, profile.recv_window)
    with bench.fleet(DBOS, 1, dsn) as fleet:
        time.sleep(SETTLE)
        idle_statements, idle_xacts = window.count()
        timeout = profile.recv_timeout + SETTLE + profile.recv_window + 60.0
        try:
            parked = fleet.call_one(
                "park_recv", runs=profile.recv_runs, timeout=timeout, settle=SETTLE
            )
        except Exception as exc:
            bench.note(f"messages/dbos: {profile.recv_runs:,} runs waiting in recv failed: {exc}")
            return None
        statements, xacts = window.count()
        loaded = fleet.call_one("rss_now")
    return {
        "runs": profile.recv_runs,
        "rss_before_kib": parked["rss_before_kib"],
        "rss_parked_kib": loaded,
        "rss_per_run_kib": (loaded - parked["rss_before_kib"]) / profile.recv_runs,
        "idle_statements_per_s": idle_statements,
        "statements_per_s": statements,
        "idle_xacts_per_s": idle_xacts,
        "xacts_per_s": xacts,
        "window_s": profile.recv_window,
        "seconds_to_park": round(parked["seconds"], 2),
        "method": METHOD,
        "threads": "one executor thread per waiting workflow",
    }
