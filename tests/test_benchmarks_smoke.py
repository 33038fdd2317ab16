"""The benchmark harness runs end to end on tiny sizes, without the peers.

Not a benchmark: it checks that ``python -m benchmarks run`` still works
(agents in processes, throwaway databases, the table, the JSON) so CI needs
neither PgQueuer nor Procrastinate. The figures it produces mean nothing.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
"""The repository: ``benchmarks`` is a top-level package beside ``querator``."""


def test_harness_runs_querator_and_the_plain_loop(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("QUERATOR_BENCH_DSN", pg_dsn)
    pg = importlib.import_module("benchmarks.pg")
    runner = importlib.import_module("benchmarks.runner")
    before = set(pg.leftover_databases())
    document = runner.run(
        runner.Options(
            profile="tiny",
            scenarios=("produce", "drain", "idle", "embedded", "step_loop", "parked", "locks"),
            systems=("querator", "plain"),
            install=False,
            results_dir=tmp_path,
            update_docs=False,
            command="smoke test",
        )
    )

    measured = {(m["scenario"], m["system"]) for m in document["measurements"]}
    for scenario in ("produce", "drain", "idle"):
        assert {(scenario, "querator"), (scenario, "plain")} <= measured
    assert ("drain", "querator-threads") in measured
    assert ("embedded", "querator") in measured  # in-process: SQLite file and in-memory
    assert {("step_loop", "querator"), ("parked", "querator")} <= measured  # worker processes
    assert {("locks", "querator"), ("locks", "pg advisory lock")} <= measured
    assert not [n for n in document["notes"] if "FAILED" in n]
    saved = json.loads((tmp_path / "latest.json").read_text())
    assert saved["profile"] == "tiny" and saved["measurements"]
    table = capsys.readouterr().out
    assert "| batch=10 consumers=2 | items/s |" in table
    assert "#### Targets (issue 4)" in table
    assert set(pg.leftover_databases()) <= before, "the run left throwaway databases behind"
