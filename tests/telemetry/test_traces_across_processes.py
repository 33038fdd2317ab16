"""One trace per run across processes, exported over OTLP/HTTP to a collector.

A three-step run is started with ``querator start`` and served by two worker
processes (``querator worker``), each exporting its spans with
``opentelemetry-exporter-otlp-proto-http`` to a receiver this test runs on
127.0.0.1. The first worker is killed with SIGKILL in the middle of step 1;
the second runs it again, replays the run from its history (step 0 comes back
from the stored record) and runs step 2. The spans must form one trace under
the ``start`` span, with no span for the step the replay returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from otlp_receiver import ReceivedSpan, otlp_receiver
from polling import wait_for
from workflows.ops_procs import WorkerProc

from querator import Querator, QueueSettings, telemetry
from querator.workflows import RunHandle
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta

from .traced_app import WORK_QUEUE

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.telemetry.traced_app"
SHORT_LEASE = QueueSettings(lease_timeout=1.0, expire_timeout=3600.0)


def _env(endpoint: str, service: str) -> dict[str, str]:
    return {**os.environ, "QUERATOR_TEST_OTLP": endpoint, "QUERATOR_TEST_SERVICE": service}


def _worker(url: str, endpoint: str, name: str, tmp_path: Path) -> WorkerProc:
    err = tmp_path / f"{name}.err"
    command = [sys.executable, "-m", "querator.cli", "worker", APP, "--url", url]
    command += ["--client-id", name, "--log-format", "json", "--concurrency", "2"]
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=_env(endpoint, name)
        )
    return WorkerProc(name, proc, err)


def _start(url: str, endpoint: str, gate: Path) -> str:
    command = [sys.executable, "-m", "querator.cli", "start", "xp.three", "--app", APP]
    command += ["--args", json.dumps([str(gate)]), "--url", url]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(endpoint, "cli"),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _steps(spans: list[ReceivedSpan]) -> list[tuple[int, int, str]]:
    """(position, attempt, service) of the step spans."""
    return sorted(
        (s.attributes["querator.step.position"], s.attributes["querator.step.attempt"], s.service)
        for s in spans
        if s.name == "step xp.work"
    )


def test_a_run_killed_mid_step_is_one_trace(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'traces.db'}"
    gate = tmp_path / "gate"
    with Querator(url) as q, otlp_receiver() as receiver:
        q.create_queue(WORK_QUEUE, SHORT_LEASE)
        run_id = _start(url, receiver.endpoint, gate)
        stored = q.lookup(RESULTS_QUEUE, [meta_key(run_id)])[meta_key(run_id)]
        context = telemetry.span_context(RunMeta.model_validate_json(stored.payload).trace)
        assert context is not None, "the run's trace context is stored with it"
        trace_id = context.trace_id

        first = _worker(url, receiver.endpoint, "worker-a", tmp_path)
        try:
            wait_for(Path(f"{gate}.claimed").exists, timeout=30, message="step 1 runs on a")
        finally:
            first.kill()
        second = _worker(url, receiver.endpoint, "worker-b", tmp_path)
        try:
            assert RunHandle(q, run_id).result(timeout=60) == [0, 10, 20]
            wait_for(
                lambda: len(_steps(receiver.spans(trace_id))) >= 3,
                timeout=30,
                message="the run's step spans arrive",
            )
        finally:
            assert second.terminate() == 0, second.stderr()
        spans = receiver.spans(trace_id)

    [start] = [s for s in spans if s.name.startswith("start ")]
    assert (start.name, start.service, start.parent_id) == ("start xp.three", "cli", None)
    assert start.attributes["querator.run.id"] == run_id
    assert start.span_id == context.span_id
    # Step 1's first attempt died with worker a (its span never ended); b ran it
    # again, then replayed the run (step 0 from its record: no span) and ran step 2.
    assert _steps(spans) == [(0, 1, "worker-a"), (1, 2, "worker-b"), (2, 1, "worker-b")]
    steps = [s for s in spans if s.name == "step xp.work"]
    assert all(s.parent_id == start.span_id for s in steps)
    assert all(s.attributes["querator.run.id"] == run_id for s in steps)
    assert all(s.attributes["querator.step.outcome"] == "completed" for s in steps)

    # b replayed the run, and its JSON log lines carry the run, step and trace.
    lines = [json.loads(line) for line in second.stderr().splitlines() if line.startswith("{")]
    [stopped] = [r for r in lines if r["msg"].startswith("worker worker-b stopped")]
    assert "replayed=" in stopped["msg"]
    in_step = [r for r in lines if r.get("step") == "xp.work"]
    assert {r["position"] for r in in_step} == {1, 2}
    assert all(r["run_id"] == run_id for r in in_step)
    assert all(r["trace_id"] == format(trace_id, "032x") for r in in_step)
