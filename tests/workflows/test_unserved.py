"""An item that no live worker serves waits and says so: in the run's detail
(``get_run``, ``runs show``), in ``querator health`` and in a WARNING of the
workers (once per name)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.cli import load_functions
from querator.clock import ManualClock
from querator.workflows import Worker, start
from querator.workflows.engine import heartbeat
from querator.workflows.inspection import get_run
from querator.workflows.pollers import Unserved, read_pollers, unserved_items

from . import app_pipeline as a
from .conftest import RunWorker
from .test_ops_cli import cli

START = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
NOBODY = "no worker serving workflow 'ux.pipeline' on queue 'querator.workflows' has polled"


def test_run_detail_says_what_no_live_worker_serves(q: Querator, run_worker: RunWorker) -> None:
    waiting = start(q, a.pipeline, 1)
    assert get_run(q, waiting.run_id).waiting_for == (f"{NOBODY} (none registered)",)
    with run_worker(load_functions("workflows.app_reports")):  # another app: no help
        wait_for(lambda: q.call(read_pollers, q.aio), timeout=10, message="b registered")
        assert get_run(q, waiting.run_id).waiting_for == (f"{NOBODY} (none registered)",)
    with run_worker(load_functions("workflows.app_pipeline")):
        assert waiting.result(timeout=20) == 4
        served = start(q, a.pipeline, 2)
        assert served.result(timeout=20) == 6
    later = start(q, a.pipeline, 3)  # a's worker stopped: its entry says since when
    [reason] = get_run(q, later.run_id).waiting_for
    assert reason.startswith(f"{NOBODY} for ") and reason.endswith("s")
    with run_worker(load_functions("workflows.app_pipeline")):
        assert later.result(timeout=20) == 8
        assert get_run(q, later.run_id).waiting_for == ()


def test_runs_show_and_health_report_unserved_items(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'unserved.db'}"
    with Querator(url) as q:
        run = start(q, a.pipeline, 1)
    shown = cli("runs", "show", run.run_id, "--url", url)
    assert f"waiting:  {NOBODY} (none registered)" in shown.stdout, shown.stderr
    patient = cli("health", "--url", url, "--json")  # within the grace: a deploy's gap
    assert patient.returncode == 0 and json.loads(patient.stdout)["unserved"] == []
    checked = cli("health", "--url", url, "--json", "--unserved-after", "0")
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["healthy"] is False
    [entry] = report["unserved"]
    assert entry["queue"] == "querator.workflows" and entry["items"] == 1
    assert entry["kind"] == "querator.wake:ux.pipeline"
    assert entry["reason"] == f"{NOBODY} (none registered)"
    text = cli("health", "--url", url, "--unserved-after", "0")
    assert f"unserved:   1 item(s) since {entry['waiting_since']}: {NOBODY}" in text.stdout
    bad = cli("health", "--url", url, "--unserved-after", "-1")
    assert bad.returncode == 2 and "--unserved-after" in bad.stderr


def test_a_worker_warns_once_per_name_nobody_serves(
    cq: Querator,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heartbeat, "HEARTBEAT", 0.1)  # it looks every third beat
    looks: list[int] = []
    looked = unserved_items

    async def counted(*args: Any, **kwargs: Any) -> list[Unserved]:
        found = await looked(*args, **kwargs)
        looks.append(len(found))
        return found

    monkeypatch.setattr(heartbeat, "unserved_items", counted)
    caplog.set_level(logging.WARNING, logger="querator.worker")
    runs = [start(cq, a.pipeline, n) for n in range(3)]
    clock.advance(300)
    with serving(Worker(cq, load_functions("workflows.app_reports"), poll_timeout=1.0)):

        def warned() -> list[str]:
            return [r.getMessage() for r in caplog.records if "ux.pipeline" in r.getMessage()]

        wait_for(lambda: len(looks) >= 3, timeout=20, message="three looks")
    assert looks[:3] == [1, 1, 1]  # each look found them (one queue and kind)
    [line] = warned()  # once, however many looks
    assert line.startswith("3 item(s) of queue querator.workflows wait since 2030-06-01T12:00:00")
    assert f"{NOBODY} (none registered)" in line
    assert all(run.status() == "running" for run in runs)
