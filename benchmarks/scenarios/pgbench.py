"""The database's own ceiling: pgbench running single-row statements.

Two custom scripts on a throwaway table, 1 and 4 clients, prepared protocol:
``INSERT`` of one small row (what a batch-1 produce cannot beat) and
``UPDATE … RETURNING`` of one row (what a batch-1 lease cannot beat). Each
pgbench transaction is one autocommit statement with its own commit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import psycopg

from benchmarks.config import PGBENCH
from benchmarks.context import Bench
from benchmarks.pg import throwaway_database
from benchmarks.results import Measurement

ROWS = 10_000
SCRIPTS = {
    "insert 1 row": "INSERT INTO pgb_jobs (payload) VALUES ('\\x0011223344556677');\n",
    "update 1 row returning": (
        f"\\set id random(1, {ROWS})\n"
        "UPDATE pgb_jobs SET attempts = attempts + 1 WHERE id = :id RETURNING id;\n"
    ),
}
TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def _binary() -> str | None:
    if os.access(PGBENCH, os.X_OK):
        return PGBENCH
    return shutil.which("pgbench")


def run(bench: Bench) -> None:
    """Transactions/s of single-row statements, 1 and 4 clients."""
    binary = _binary()
    if binary is None:
        bench.note("pgbench: not found; ceiling not measured")
        return
    bench.guarded("pgbench", lambda: _measure(bench, binary))


def _measure(bench: Bench, binary: str) -> None:
    with throwaway_database("pgbench") as dsn, tempfile.TemporaryDirectory() as tmp:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE pgb_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " attempts integer NOT NULL DEFAULT 0, payload bytea NOT NULL)"
            )
            conn.execute(
                "INSERT INTO pgb_jobs (payload) SELECT '\\x00'::bytea FROM generate_series(1, %s)",
                (ROWS,),
            )
        for label, script in SCRIPTS.items():
            path = os.path.join(tmp, "script.sql")
            with open(path, "w") as handle:
                handle.write(script)
            for clients in sorted({1, *bench.profile.consumers}):
                values = [
                    _tps(binary, dsn, path, clients, bench.profile.pgbench_seconds)
                    for _ in range(bench.profile.repetitions)
                ]
                bench.add(
                    Measurement(
                        "pgbench",
                        f"{label}, {clients} clients",
                        "pgbench",
                        "tx/s",
                        "higher",
                        values,
                    )
                )


def _tps(binary: str, dsn: str, script: str, clients: int, seconds: int) -> float:
    out = subprocess.run(
        [
            binary,
            "-n",
            "-M",
            "prepared",
            "-f",
            script,
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-T",
            str(seconds),
            dsn,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = TPS.search(out)
    if found is None:
        raise RuntimeError(f"pgbench printed no tps:\n{out}")
    return float(found.group(1))
