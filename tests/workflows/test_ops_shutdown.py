"""Graceful shutdown of a real worker process (SIGTERM), on SQLite and PostgreSQL.

The step's lease is 30 s long, so a run that completes within a few seconds of
the stop proves the stopping worker *released* its item instead of letting
the lease expire.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest
from pg_schemas import waiting_on_a_lock
from polling import wait_for

from querator import PartitionStats, Querator, QueueSettings
from querator.workflows import Worker, start
from querator.workflows.keys import RESULTS_QUEUE, step_key

from .ops_flows import WORK_QUEUE, nap, napping, napping_twice
from .ops_procs import durable_url_for, logged, spawn_worker

LONG_LEASE = QueueSettings(lease_timeout=30.0, expire_timeout=3600.0)


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def test_sigterm_mid_step_releases_the_item_at_once(durable_url: str, tmp_path: Path) -> None:
    log, hold = tmp_path / "steps.log", tmp_path / "hold"
    hold.touch()
    with Querator(durable_url) as q:
        q.create_queue(WORK_QUEUE, LONG_LEASE)
        run = start(q, napping, "k1", str(hold))
        first = spawn_worker(durable_url, "first", log, "--grace", "0.5")
        wait_for(lambda: logged(log, "start", "k1", "first"), timeout=20, message="first starts")
        stopped_at = time.monotonic()
        assert first.terminate() == 0, first.stderr()
        assert "released item" in first.stderr()
        assert not logged(log, "done", "k1")  # the step was cancelled, not finished
        hold.unlink()
        second = spawn_worker(durable_url, "second", log)
        try:
            assert run.result(timeout=20) == "napped k1 on second"
        finally:
            assert second.terminate() == 0, second.stderr()
        assert time.monotonic() - stopped_at < LONG_LEASE.lease_timeout


def test_sigterm_lets_the_step_in_hand_finish_within_the_grace(
    durable_url: str, tmp_path: Path
) -> None:
    log, hold = tmp_path / "steps.log", tmp_path / "hold"
    hold.touch()
    with Querator(durable_url) as q:
        q.create_queue(WORK_QUEUE, LONG_LEASE)
        run = start(q, napping_twice, "k2", str(hold))
        first = spawn_worker(durable_url, "first", log, "--grace", "30")
        wait_for(lambda: logged(log, "start", "k2", "first"), timeout=20, message="first starts")
        first.proc.send_signal(signal.SIGTERM)
        # the harness's line, said once the stop is requested (the signal
        # handler's own line comes before: the step could finish and hand over)
        wait_for(lambda: "item(s) in hand" in first.stderr(), timeout=10, message="first stopping")
        hold.unlink()  # the step finishes during the grace period
        assert first.wait() == 0, first.stderr()
        assert "released item" not in first.stderr()
        assert logged(log, "done", "k2", "first")
        assert step_key(run.run_id, 0) in q.lookup(RESULTS_QUEUE, [step_key(run.run_id, 0)])
        # A stopping worker dispatches the next step to the queue, it does not take it.
        assert not logged(log, "start", "k2-again")
        assert run.status() == "running"
        second = spawn_worker(durable_url, "second", log)
        try:
            assert run.result(timeout=20) == "napped k2 on first"
        finally:
            assert second.terminate() == 0, second.stderr()
        assert logged(log, "done", "k2-again", "second")


def test_stop_in_process_releases_after_the_grace(tmp_path: Path) -> None:
    """The same with a thread-run Worker (memory store): ``stop()`` twice hurries."""
    hold = tmp_path / "hold"
    hold.touch()
    with Querator("memory://") as q:
        q.create_queue(WORK_QUEUE, LONG_LEASE)
        run = start(q, napping, "k3", str(hold))
        worker = Worker(q, [napping, nap], shutdown_grace=3600, poll_timeout=0.5)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()

        def stats() -> PartitionStats:
            return q.stats(WORK_QUEUE).partitions[0]

        wait_for(lambda: (stats().total, stats().leased) == (1, 1), timeout=10, message="step")
        worker.stop()
        worker.stop()  # hurry: skip the hour of grace
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert (stats().total, stats().leased) == (1, 0)  # released, leasable now
        hold.unlink()
        helper = Worker(q, [napping, nap], poll_timeout=0.5)
        helper_thread = threading.Thread(target=helper.run, daemon=True)
        helper_thread.start()
        try:
            assert run.result(timeout=10).startswith("napped k3")
        finally:
            helper.stop()
            helper_thread.join(timeout=10)


def test_sigint_is_logged_once_and_a_second_one_releases_the_item(
    durable_url: str, tmp_path: Path
) -> None:
    log, hold = tmp_path / "steps.log", tmp_path / "hold"
    hold.touch()
    with Querator(durable_url) as q:
        q.create_queue(WORK_QUEUE, LONG_LEASE)
        start(q, napping, "k3", str(hold))
        first = spawn_worker(durable_url, "first", log, "--grace", "60")
        wait_for(lambda: logged(log, "start", "k3", "first"), timeout=20, message="first starts")
        first.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "item(s) in hand" in first.stderr(), timeout=10, message="first stopping")
        first.proc.send_signal(signal.SIGINT)  # impatient: release what is in hand now
        assert first.wait() == 0, first.stderr()
        err = first.stderr()
        assert err.count("SIGINT, stopping") == 1, err
        assert err.count("SIGINT again, releasing") == 1, err
        assert "released item" in err and "Traceback" not in err
        hold.unlink()


def test_sigterm_with_a_blocked_commit_exits_within_the_grace(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, tmp_path: Path
) -> None:
    """Another session locks every table of the store while the worker's step
    commits: the commit blocks (past the grace, short of the statement deadline),
    and the worker still exits soon after its grace; the run is not lost."""
    log, hold = tmp_path / "steps.log", tmp_path / "hold"
    hold.touch()
    grace = 1.0
    with Querator(pg_schema_url) as q:
        q.create_queue(WORK_QUEUE, LONG_LEASE)
        run = start(q, napping, "k3", str(hold))
        first = spawn_worker(pg_schema_url, "first", log, "--grace", str(grace))
        wait_for(lambda: logged(log, "start", "k3", "first"), timeout=20, message="first starts")
        with psycopg.connect(pg_dsn) as blocker:
            tables = blocker.execute(
                "SELECT format('%%I.%%I', schemaname, tablename) FROM pg_tables"
                " WHERE schemaname = %s",
                (pg_schema,),
            ).fetchall()
            for (table,) in tables:
                blocker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            hold.unlink()  # the step ends; its commit waits on the lock
            wait_for(lambda: logged(log, "done", "k3", "first"), timeout=20, message="step done")
            wait_for(
                lambda: waiting_on_a_lock(pg_dsn, pg_schema), timeout=20, message="blocked commit"
            )
            stopped_at = time.monotonic()
            first.proc.send_signal(signal.SIGTERM)
            code = first.wait(timeout=60)
            took = time.monotonic() - stopped_at
            blocker.rollback()
        assert code == 0, first.stderr()
        print(f"exited {took:.2f}s after SIGTERM (grace {grace}s)")
        assert took < grace + 10.0, f"{took:.1f}s to exit\n{first.stderr()}"
        assert "still in flight" in first.stderr()
        second = spawn_worker(pg_schema_url, "second", log, "--grace", str(grace))
        try:  # the step's lease expires (30 s): the run goes on, nothing lost
            assert run.result(timeout=90).startswith("napped k3 on")
        finally:
            assert second.terminate() == 0, second.stderr()
