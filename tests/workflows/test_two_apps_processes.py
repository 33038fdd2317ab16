"""Two apps on one PostgreSQL database, side by side, with real worker processes
(``querator worker``): 500 runs of each, one app's workers redeployed twice
meanwhile (SIGTERM, graceful); no run fails and every run is listed once.

App B (:mod:`.app_reports`) serves workflows of its own queue but steps without
a queue, so it also leases from the default queue where app A
(:mod:`.app_pipeline`) lives: before routing it leased A's items and failed A's
runs (``UnknownWorkflow``, ``UnknownStep``), above all while A was redeployed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows import start
from querator.workflows.inspection import RunInfo, list_runs
from querator.workflows.runs import RunHandle

from . import app_pipeline as a
from . import app_reports as b
from .ops_procs import WorkerProc

ROOT = Path(__file__).resolve().parents[2]
RUNS = 500
"""Runs per app (a tenth of them sagas)."""
CHUNKS = 3
"""The runs are started in this many chunks; app A is redeployed between them."""


def _spawn(url: str, module: str, name: str, tmp_path: Path) -> WorkerProc:
    err = tmp_path / f"{name}.err"
    command = [sys.executable, "-m", "querator.cli", "worker", f"tests.workflows.{module}"]
    options = ["--url", url, "--concurrency", "16", "--client-id", name]
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*command, *options],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    return WorkerProc(name, proc, err)


def _start_chunk(q: Querator, first: int, count: int) -> list[tuple[RunHandle[Any], Any]]:
    """Start ``count`` runs of each app, interleaved; each with its expected result."""
    started: list[tuple[RunHandle[Any], Any]] = []
    for n in range(first, first + count):
        if n % 10 == 0:
            started.append((start(q, a.booking, n), f"r{n}-{n + 1}"))
            started.append((start(q, b.trip, n), f"h{n}"))
        else:
            started.append((start(q, a.pipeline, n), (n + 1) * 2))
            started.append((start(q, b.report, n), n + 10))
    return started


def _all_runs(q: Querator) -> list[RunInfo]:
    """Every run, page after page of ``list_runs``."""
    found: list[RunInfo] = []
    after: str | None = None
    while page := list_runs(q, after=after, limit=500):
        found += page
        after = page[-1].run_id
    return found


def _serving(worker: WorkerProc) -> Callable[[], bool]:
    return lambda: "serving" in worker.stderr()


def _redeploy(url: str, workers: list[WorkerProc], names: list[str], tmp_path: Path) -> None:
    """Stop every worker of ``workers`` (SIGTERM, all at once), then start ``names``."""
    for worker in workers:
        wait_for(_serving(worker), timeout=30, message=f"{worker.name} serving")
        worker.proc.terminate()
    for worker in workers:
        assert worker.wait(60) == 0, worker.stderr()
    workers[:] = [_spawn(url, "app_pipeline", name, tmp_path) for name in names]


def test_two_apps_side_by_side_while_one_is_redeployed(pg_schema_url: str, tmp_path: Path) -> None:
    url = pg_schema_url
    app_a = [_spawn(url, "app_pipeline", f"a{i}", tmp_path) for i in range(2)]
    app_b = [_spawn(url, "app_reports", "b0", tmp_path)]
    everyone = list(app_a + app_b)
    try:
        with Querator(url) as q:
            runs: list[tuple[RunHandle[Any], Any]] = []
            size = RUNS // CHUNKS + 1
            for chunk, first in enumerate(range(0, RUNS, size)):
                runs += _start_chunk(q, first, min(size, RUNS - first))
                if chunk < CHUNKS - 1:  # while those run: redeploy app A
                    _redeploy(url, app_a, [f"a{chunk}-{i}" for i in range(2)], tmp_path)
                    everyone += app_a
            results = [(handle.result(timeout=120), expected) for handle, expected in runs]
            assert all(got == want for got, want in results)
            listed = _all_runs(q)
        ids = [info.run_id for info in listed]
        assert len(ids) == len(set(ids)), "a run listed twice"
        assert sorted(ids) == sorted(handle.run_id for handle, _ in runs)
        assert {info.status for info in listed} == {"completed"}
    finally:
        for worker in everyone:
            if worker.proc.poll() is None:
                worker.proc.terminate()
        for worker in everyone:
            worker.wait(60)
    for worker in everyone:
        log = worker.stderr()
        assert "Traceback" not in log and "UnknownWorkflow" not in log, log[-3000:]


@pytest.fixture(autouse=True)
def _postgres_only(pg_dsn: str) -> None:
    """This test needs PostgreSQL (and skips or fails as the other PostgreSQL tests do)."""
