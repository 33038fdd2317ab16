"""Failover to a promoted standby: never a silent loss.

A primary and a streaming standby (throwaway clusters), two worker processes
and the test's client on a multi-host URL (``target_session_attrs=read-write``,
so every session goes to whichever is the primary). :data:`RUNS` five-step
runs are started; once a third of them finished, the primary is stopped with
``-m immediate`` (a crash) and the standby promoted.

- ``querator health --require-sync-replication`` passes on the synchronous
  pair and fails on the asynchronous one;
- synchronous replication: every run completes with the right result; a step
  runs again only when its worker was inside it at the crash (its commit could
  not be acknowledged);
- asynchronous, the standby lagging (it stops receiving :data:`LAG_SECONDS`
  before the crash): runs started in the lag are lost, and every process that
  reconnects says so, once, at ERROR ("FAILOVER", the timeline change).

:data:`IN_LAG` of the runs are started in the last :data:`LAG_SECONDS`
before the crash, in both modes. RUNS is 60, not the issue's 200: each run
takes 2.5 s of steps and the machine has two cores; 60 runs put about 30 in
flight at the crash, which is what the test is about. The report
line gives the figures.
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for
from workflows import live_flows
from workflows.ops_procs import WorkerProc, read_log, spawn_worker

from querator import Querator
from querator.errors import InvalidArgument, RequestTimeout, Unavailable
from querator.workflows import RunHandle, WorkflowError, start
from querator.workflows.errors import RunNotFound

from .cluster import Cluster, ClusterError
from .harness import report, until_available
from .standby import detach, make_standby, promote, synchronous

pytestmark = pytest.mark.faults

LIVE_WORKER = Path(live_flows.__file__).with_name("live_worker.py")
RUNS = 60
STEPS = 5
EXPECTED = sum(range(STEPS))
STEP_SECONDS = "0.5"
"""Long enough steps that about half the runs are in flight at the crash."""
IN_LAG = 10
"""Runs started in the last :data:`LAG_SECONDS` before the crash."""
LAG_SECONDS = 2.0
FINISH_DEADLINE = 120.0


@pytest.fixture
def pair() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and its standby, destroyed after the test."""
    try:
        primary = Cluster.create()
    except ClusterError as exc:
        pytest.fail(f"could not make a throwaway PostgreSQL cluster: {exc}", pytrace=False)
    try:
        standby = make_standby(primary)
    except BaseException:
        primary.destroy()
        raise
    try:
        yield primary, standby
    finally:
        standby.destroy()
        primary.destroy()


def _url(primary: Cluster, standby: Cluster) -> str:
    hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
    schema = f"f_{secrets.token_hex(6)}"
    return (
        f"postgresql://root@{hosts}/{primary.database}"
        f"?target_session_attrs=read-write&connect_timeout=2&schema={schema}"
    )


def _start(q: Querator, numbers: range) -> list[tuple[str, RunHandle[int]]]:
    runs = []
    for n in numbers:
        key = f"r{n}"
        runs.append((key, start(q, live_flows.loop, key, STEPS, idempotency_key=key)))
    return runs


def _health(url: str) -> dict[str, Any]:
    """``querator health --require-sync-replication --json`` on ``url``: its report,
    its exit status checked against the report's verdict."""
    command = ["health", "--url", url, "--json", "--require-sync-replication"]
    done = subprocess.run(
        [sys.executable, "-m", "querator.cli", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if report["healthy"] else 1), done.stderr
    return report


def _said_failover(worker: WorkerProc) -> bool:
    return "FAILOVER" in worker.stderr()


def _serving(worker: WorkerProc) -> bool:
    return "serving" in worker.stderr()


def _outcome(run: RunHandle[int], deadline: float) -> str:
    """``lost`` (not stored), ``ok``, ``wrong``, ``failed`` or ``unfinished``."""
    try:
        until_available(run.status, deadline)
    except (InvalidArgument, RunNotFound):
        return "lost"
    while time.monotonic() < deadline:
        try:
            value = run.result(timeout=5.0)
        except (RequestTimeout, Unavailable):
            continue
        except WorkflowError:
            return "failed"
        return "ok" if value == EXPECTED else "wrong"
    return "unfinished"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", ["synchronous", "asynchronous-lagging"])
def test_a_failover_loses_nothing_or_says_so(
    mode: str, pair: tuple[Cluster, Cluster], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    primary, standby = pair
    if mode == "synchronous":
        synchronous(primary)
    url = _url(primary, standby)
    probe = _health(url)
    assert probe["replication"]["synchronous"] is (mode == "synchronous"), probe
    log = tmp_path / "steps.log"
    env = {"LIVE_STEP_SECONDS": STEP_SECONDS}
    caplog.set_level(logging.ERROR, logger="querator.postgres")
    workers: list[WorkerProc] = []
    with Querator(url) as q:
        try:
            for n in range(2):
                worker = spawn_worker(url, f"w{n}", log, "--poll", "1", script=LIVE_WORKER, env=env)
                workers.append(worker)
                wait_for(partial(_serving, worker), timeout=60, message="serving")
            runs = _start(q, range(RUNS - IN_LAG))

            def finished() -> int:
                return sum(1 for verb, _, pos, _ in read_log(log) if verb == "done" and pos == 4)

            wait_for(lambda: finished() >= RUNS // 3, timeout=120, message="a third finished")
            if mode != "synchronous":
                detach(primary, standby)
            lag_began = time.monotonic()
            runs += _start(q, range(RUNS - IN_LAG, RUNS))  # their start() returns
            # Commits go on for LAG_SECONDS: an asynchronous standby never gets them.
            time.sleep(max(0.0, LAG_SECONDS - (time.monotonic() - lag_began)))
            crashed_at = time.time()
            primary.stop("immediate")
            promote(standby)
            promoted_in = time.time() - crashed_at
            deadline = time.monotonic() + FINISH_DEADLINE
            outcomes = Counter(_outcome(run, deadline) for _, run in runs)
            finished_in = time.time() - crashed_at
            for worker in workers:  # an idle worker reconnects at its next lease poll
                wait_for(partial(_said_failover, worker), timeout=30, message="FAILOVER said")
        finally:
            for worker in workers:
                if worker.proc.poll() is None:
                    worker.proc.terminate()
            exits = [worker.wait(60) for worker in workers]
    done = Counter((key, pos) for verb, key, pos, _ in read_log(log) if verb == "done")
    reruns = sum(count - 1 for count in done.values())
    stderr = "\n".join(worker.stderr() for worker in workers)
    said = [w.name for w in workers if "FAILOVER" in w.stderr()]
    client_said = sum("FAILOVER" in r.getMessage() for r in caplog.records)
    report(
        "failover",
        {
            "mode": mode,
            "runs": RUNS,
            "ok": outcomes["ok"],
            "lost": outcomes["lost"],
            "unfinished": outcomes["unfinished"],
            "failed": outcomes["failed"] + outcomes["wrong"],
            "rerun_steps": reruns,
            "promoted_s": f"{promoted_in:.2f}",
            "finished_s": f"{finished_in:.2f}",
            "workers_said_failover": len(said),
            "client_said_failover": client_said,
            "exits": ",".join(str(code) for code in exits),
        },
    )
    assert outcomes["failed"] == outcomes["wrong"] == outcomes["unfinished"] == 0, outcomes
    assert len(said) == len(workers), f"a worker did not report the failover:\n{stderr[-4000:]}"
    assert client_said == 1, "the client reports the failover once"
    if mode == "synchronous":
        assert outcomes["ok"] == RUNS, outcomes
    else:
        # Asynchronous: what was committed in the lag is gone: the runs started
        # then (their start() had returned), and steps completed then run again.
        assert outcomes["lost"] == IN_LAG, outcomes
        assert outcomes["ok"] == RUNS - IN_LAG, outcomes
