"""Worker processes killed with SIGKILL during a Spark stage; the example runs as written.

The crash test is also the instrumented pipeline's end-to-end check (result,
report, commit markers): a run without a crash would start the same three
stages on the same data for no more proof."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from example_runs import EXAMPLES, run_example

from querator import Querator
from querator.spark import is_committed, read_marker, storage_for
from querator.workflows import start

from .flows import counts, example, t_pipeline
from .test_pipeline import expected_report

HERE = Path(__file__).resolve().parent


def start_worker(url: str, log: Path, functions: str = "pipeline") -> subprocess.Popen[bytes]:
    """A worker process (``worker_proc.py``) serving ``functions``, its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(HERE / "worker_proc.py"), url, functions],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM dies with it
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's process group (its JVM too) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < end, f"no {path.name}: {log.read_text()[-3000:]}"
        time.sleep(0.1)


def test_sigkill_during_stage_two_resumes_at_stage_two(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    example.write_raw(tmp_path / "raw", example.generate_events())
    root = tmp_path / "out"
    root.mkdir()
    (root / "gate").touch()  # stage 2 blocks after writing its staging output
    log = tmp_path / "workers.log"
    with Querator(url) as q:
        run = start(q, t_pipeline, str(tmp_path / "raw"), str(root))
        first = start_worker(url, log)
        try:
            _wait_for(root / "clean-waiting", first, 120, log)
            assert is_committed(str(root / "bronze"))
            assert any((root / "silver._staging").iterdir())  # half-done staging output
            assert not (root / "silver").exists()
        finally:
            kill(first)
        (root / "gate").unlink()
        second = start_worker(url, log)
        try:
            result = run.result(timeout=150)
        finally:
            kill(second)
    assert counts(root, "ingest") == 1  # stage 1 never re-ran
    assert counts(root, "clean") == 2  # stage 2 ran again, in the new process
    assert counts(root, "aggregate") == 1
    assert result == {
        "raw_rows": len(example.generate_events()),
        "clean_rows": sum(r[2] for r in expected_report()),
        "report_rows": len(expected_report()),
    }
    for name in ("bronze", "silver", "report"):  # every output committed by this run
        assert is_committed(str(root / name))
        assert not (root / f"{name}._staging").exists()
        marker = read_marker(storage_for(str(root / name)), str(root / name))
        assert marker is not None and marker.run_id == run.run_id
    pids = {line.split()[0] for line in (root / "counts" / "clean.log").read_text().splitlines()}
    assert len(pids) == 2
    got = _read_report(root / "report")
    want = expected_report()
    assert [r[:4] for r in got] == [r[:4] for r in want]
    assert [r[4] for r in got] == pytest.approx([r[4] for r in want], abs=0.011)


def _read_report(path: Path) -> list[tuple[str, str, int, int, float]]:
    import pyarrow.parquet as pq

    table = pq.read_table(str(path)).to_pylist()
    rows = [(r["day"], r["type"], r["events"], r["users"], r["amount"]) for r in table]
    return sorted(rows)


def test_example_runs_as_written(tmp_path: Path) -> None:
    lines = run_example(EXAMPLES / "spark_pipeline.py", tmp_path, timeout=240, keeps_temp=True)
    want = expected_report()
    assert (
        f"raw rows: {len(example.generate_events())}, clean rows: {sum(r[2] for r in want)}"
        in lines
    )
    body = [
        line.split()
        for line in lines[lines.index(next(x for x in lines if x.startswith("day"))) + 1 :]
    ]
    assert [(d, t, int(e), int(u)) for d, t, e, u, _ in body] == [r[:4] for r in want]
