"""The benchmark harness runs end to end on tiny sizes, without the peers.

Not a benchmark: it checks that ``python -m benchmarks run`` still works
(agents in processes, throwaway databases, the table, the JSON) so CI needs
neither PgQueuer nor Procrastinate. The figures it produces mean nothing.
"""

from __future__ import annotations

import importlib
import json
import secrets
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
"""The repository: ``benchmarks`` is a top-level package beside ``querator``."""


@pytest.fixture
def bench_pg(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks.pg`` with throwaway databases of a prefix of this test's own
    (another run's ``qbench_`` databases are none of its business)."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("QUERATOR_BENCH_DSN", pg_dsn)
    monkeypatch.setenv("QUERATOR_BENCH_DB_PREFIX", f"qbench_t{secrets.token_hex(4)}_")
    return importlib.import_module("benchmarks.pg")


def test_harness_runs_querator_and_the_plain_loop(
    bench_pg: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = importlib.import_module("benchmarks.runner")
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
    assert bench_pg.throwaway_databases() == [], "the run left throwaway databases behind"


def test_clean_drops_only_the_databases_of_runs_that_are_gone(bench_pg: ModuleType) -> None:
    main = importlib.import_module("benchmarks.__main__").main
    orphan = f"{bench_pg.db_prefix()}killed_1_abc"
    with bench_pg.admin() as conn:  # what a killed run leaves: a database, no lock
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(orphan)))
    with bench_pg.throwaway_database("running") as dsn:
        running = bench_pg.database_of(dsn)
        assert bench_pg.throwaway_databases() == sorted([orphan, running])
        assert bench_pg.leftover_databases() == [orphan]
        assert main(["clean"]) == 0
        assert bench_pg.throwaway_databases() == [running]  # the running one is kept
    assert bench_pg.throwaway_databases() == []


def _tiny_run(results: Path, scenario: str, system: str) -> dict[str, Any]:
    """One scenario of the tiny profile for one system (no peers installed)."""
    runner = importlib.import_module("benchmarks.runner")
    document: dict[str, Any] = runner.run(
        runner.Options(
            profile="tiny",
            scenarios=(scenario,),
            systems=(system,),
            install=False,
            results_dir=results,
            update_docs=False,
            command="smoke test",
        )
    )
    return document


def test_the_tasks_scenario_runs_querator_tasks(bench_pg: ModuleType, tmp_path: Path) -> None:
    document = _tiny_run(tmp_path, "tasks", "querator-tasks")
    cases = {(m["case"], m["metric"]) for m in document["measurements"]}
    assert ("defer, batch=100", "tasks/s") in cases
    assert ("run: 2 workers x concurrency 8", "client CPU µs/task") in cases
    assert not [n for n in document["notes"] if "FAILED" in n]


def test_the_retention_drain_scenario_drains_beside_a_purge(
    bench_pg: ModuleType, tmp_path: Path
) -> None:
    document = _tiny_run(tmp_path, "retention_drain", "querator")
    found = {m["metric"]: m for m in document["measurements"]}
    assert {"items/s", "ratio", "runs/s"} <= set(found)
    assert found["ratio"]["detail"]["purged"] > 0
    assert not [n for n in document["notes"] if "FAILED" in n]
