"""``querator tasks`` and ``querator worker`` serving tasks, as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_forks import run_cli
from polling import wait_for
from workflows.ops_procs import WorkerProc

from querator import Querator
from querator.tasks import TASK_QUEUE

from .task_procs import count

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m querator.cli ARGS`` from the repository root (a forked process)."""
    return run_cli(*args)


def spawn_cli_worker(url: str, tmp_path: Path, log: Path) -> WorkerProc:
    err = tmp_path / "cli-worker.err"
    target = "tests.tasks.app_tasks"
    options = ["--url", url, "--concurrency", "2", "--client-id", "cli-w", "--no-scheduler"]
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "querator.cli", "worker", target, *options],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "TASKS_LOG": str(log), "TASKS_WORKER": "cli-w"},
        )
    return WorkerProc("cli-w", proc, err)


def _listed(url: str, *options: str) -> list[dict[str, object]]:
    done = cli("tasks", "list", "--url", url, "--json", *options)
    assert done.returncode == 0, done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def test_defer_list_fail_and_retry_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    log = tmp_path / "tasks.log"
    with Querator(url):
        pass  # the store exists
    deferred = cli("tasks", "defer", "t.add", "--args", '{"a": 1, "b": 2}', "--url", url)
    assert deferred.returncode == 0, deferred.stderr
    item_id, task_id = deferred.stdout.split()
    [waiting] = _listed(url)
    assert (waiting["id"], waiting["task_id"], waiting["state"]) == (item_id, task_id, "waiting")
    table = cli("tasks", "list", "--url", url)
    assert "t.add: 1" in table.stdout

    assert cli("tasks", "defer", "t.boom", "--args", '{"key": "b"}', "--url", url).returncode == 0
    misfit = cli("tasks", "defer", "t.add", "--args", '{"a": "x"}', "--url", url)
    assert misfit.returncode == 0, misfit.stderr
    worker = spawn_cli_worker(url, tmp_path, log)
    try:
        wait_for(lambda: len(_listed(url, "--failed")) == 2, timeout=60, message="2 failed")
        assert count(log, "add", "1+2") == 1
        failed = {str(f["name"]): f for f in _listed(url, "--failed")}
        assert "ValueError: bad input b" in str(failed["t.boom"]["reason"])
        assert "do not fit" in str(failed["t.add"]["reason"])
        retried = cli("tasks", "retry", str(failed["t.boom"]["id"]), "--url", url)
        assert retried.returncode == 0, retried.stderr
        assert "1 task(s) sent back" in retried.stdout
        wait_for(lambda: count(log, "boom", "b") == 2, timeout=60, message="boom ran again")
    finally:
        assert worker.terminate() == 0, worker.stderr()
    with Querator(url) as q:
        assert sum(p.total for p in q.stats(TASK_QUEUE).partitions) == 0


def test_bad_arguments_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url):
        pass
    for args, message in [
        ("[1, 2]", "must be a JSON object"),
        ('{"a": NaN}', "NaN is not JSON"),
        ("{oops", "is not JSON"),
    ]:
        done = cli("tasks", "defer", "t.add", "--args", args, "--url", url)
        assert done.returncode == 2
        assert message in done.stderr
    assert cli("tasks", "retry", "--url", url).returncode == 2


def test_defer_from_the_command_line_takes_a_priority(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prio.db'}"
    Querator(url).close()  # the store exists (the CLI never creates one)
    done = cli("tasks", "defer", "cli.t.later", "--delay", "3600", "--priority", "7", "--url", url)
    assert done.returncode == 0, done.stderr
    item_id = done.stdout.split()[0]
    bad = cli("tasks", "defer", "cli.t.later", "--priority", "70000", "--url", url)
    assert bad.returncode != 0 and "priority" in bad.stderr
    with Querator(url) as q:
        assert [(i.id, i.priority) for i in q.list_items(TASK_QUEUE)] == [(item_id, 7)]
