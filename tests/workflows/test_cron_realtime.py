"""Real time: a per-second schedule, in threads and in two OS processes."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import RunHandle
from querator.workflows.cron.api import delete_schedule, get_schedule, schedule
from querator.workflows.cron.scheduler import Scheduler

from .conftest import RunWorker
from .cron_flows import every_second, record, runs_per_tick

EVERY_SECOND = "* * * * * *"


def test_cron_realtime_per_second_schedule(q: Querator, run_worker: RunWorker) -> None:
    schedule(q, "tick", record, cron=EVERY_SECOND, args=("rt",), overlap="allow_all")
    scheduler = Scheduler(q, interval=1.0)
    thread = threading.Thread(target=scheduler.run, daemon=True)
    thread.start()
    try:
        with run_worker([record]):
            wait_for(lambda: len(runs_per_tick(q)) >= 3, timeout=15, message="3 ticks fired")
            info = get_schedule(q, "tick")
            text = RunHandle(q, info.last_run_id or "", record).result(timeout=10)
    finally:
        scheduler.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()
    label, _, tick = text.partition("@")
    instant = datetime.fromisoformat(tick)
    assert label == "rt" and instant.microsecond == 0 and instant.tzinfo is not None
    assert abs((datetime.now(UTC) - instant).total_seconds()) < 15
    assert set(runs_per_tick(q).values()) == {1}


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_cron_two_scheduler_processes_never_double_fire(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'q.db'}"
        if store == "sqlite"
        else str(request.getfixturevalue("pg_schema_url"))
    )
    with Querator(url) as q:
        schedule(q, "tick", record, cron=EVERY_SECOND, args=("p",), overlap="allow_all")
        script = Path(__file__).with_name("cron_procs.py")
        procs = [subprocess.Popen([sys.executable, str(script), url, "4"]) for _ in range(2)]
        for proc in procs:
            assert proc.wait(timeout=60) == 0
        counts = runs_per_tick(q)
        assert len(counts) >= 2, counts
        assert set(counts.values()) == {1}, counts
        assert delete_schedule(q, "tick")


def test_cron_worker_fires_its_decorated_schedule(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([every_second]):
        wait_for(
            lambda: len(runs_per_tick(q, "cron.every_second")) >= 2,
            timeout=15,
            message="the worker's scheduler fired 2 ticks",
        )
        info = get_schedule(q, "cron.every_second")
        assert info.cron == "* * * * * *"
        wait_for(lambda: get_schedule(q, "cron.every_second").last_run_status == "completed")
    assert set(runs_per_tick(q, "cron.every_second").values()) == {1}
