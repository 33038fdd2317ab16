"""Schedules fired by real processes: ``querator worker`` fires the schedules of
the workflows it serves (no ``@workflow(schedule=...)`` needed), next to
another worker and a ``querator scheduler``; every tick starts one run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.workflows.cron.api import get_schedule

from .cron_flows import runs_per_tick
from .ops_procs import WorkerProc, durable_url_for
from .test_ops_cli import ROOT, cli

APP = "tests.workflows.cron_app"


def spawn(name: str, tmp_path: Path, *args: str) -> WorkerProc:
    """``querator ARGS`` in the background, its stderr in a file."""
    err = tmp_path / f"{name}.err"
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "querator.cli", *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return WorkerProc(name, proc, err)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_cron_workers_and_a_scheduler_fire_a_created_schedule_once_per_tick(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = durable_url_for(request, tmp_path, store)
    with Querator(url) as q:
        q.create_queue("bootstrap")  # the store exists (the CLI never creates one)
        created = cli(
            "schedules", "create", "every-second", "cron_app.pipeline", "--app", APP,
            "--cron", "* * * * * *", "--args", '["p"]', "--overlap", "allow_all", "--url", url,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        assert created.stdout.startswith("every-second: cron_app.pipeline at * * * * * *")
        alone = spawn("s0", tmp_path, "scheduler", "--url", url, "--interval", "1")
        try:
            more_ticks(q, 2)  # nobody runs them yet: each tick's run waits
        finally:
            assert alone.terminate() == 0, alone.stderr()
        procs = [
            spawn("w1", tmp_path, "worker", APP, "--url", url, "--concurrency", "2"),
            spawn("w2", tmp_path, "worker", APP, "--url", url, "--concurrency", "2"),
        ]
        try:
            more_ticks(q, 2)  # fired by the workers alone
            procs.append(spawn("s1", tmp_path, "scheduler", "--url", url, "--interval", "1"))
            more_ticks(q, 3)
            wait_for(
                lambda: get_schedule(q, "every-second").last_run_status == "completed",
                timeout=30,
            )
        finally:
            codes = [proc.terminate() for proc in procs]
        assert codes == [0, 0, 0], [proc.stderr() for proc in procs]
        counts = runs_per_tick(q, "cron_app.pipeline")
        assert set(counts.values()) == {1}, counts
        assert "scheduler serving" in alone.stderr() and "scheduler stopped" in alone.stderr()


def more_ticks(q: Querator, count: int) -> None:
    """Wait until ``count`` more ticks than now have started runs."""
    seen = len(runs_per_tick(q, "cron_app.pipeline"))
    wait_for(
        lambda: len(runs_per_tick(q, "cron_app.pipeline")) >= seen + count,
        timeout=30,
        message=f"{count} more ticks fired",
    )


def test_schedules_create_names_the_bad_option_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with Querator(url) as q:
        q.create_queue("bootstrap")
    base = ["schedules", "create", "s", "cron_app.pipeline", "--app", APP, "--url", url]
    cases = [
        (["--cron", "0 0 30 2 *"], "invalid --cron: '0 0 30 2 *' never fires"),
        (["--cron", "* * * * *", "--args", '["a", "b", "c"]'], "cron_app.pipeline"),
        (["--cron", "* * * * *", "--tz", "Mars/Base"], "invalid --tz"),
    ]
    for extra, said in cases:
        done = cli(*base, *extra)
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert said in line, line
    assert "no schedule" in cli("schedules", "show", "s", "--url", url).stderr
