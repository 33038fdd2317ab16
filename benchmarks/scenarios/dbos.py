"""Issue 5's yardstick: DBOS workflows/s for a three-step no-op workflow.

Recorded for a later comparison with querator's workflow layer, which does not
exist yet: one caller thread (each workflow's latency bound) and 4 caller
threads, each workflow run to completion.
"""

from __future__ import annotations

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.systems import DBOS
from benchmarks.systems.base import Span


def run(bench: Bench) -> None:
    """Workflows/s of DBOS, when it is installed and chosen."""
    if DBOS not in bench.systems:
        return
    bench.guarded("dbos", lambda: _measure(bench))


def _rate(span: Span) -> float:
    return span.count / (span.end - span.start)


def _measure(bench: Bench) -> None:
    profile = bench.profile
    with bench.fresh_database(DBOS) as dsn, bench.fleet(DBOS, 1, dsn) as fleet:
        for threads in sorted({1, *profile.consumers}):
            warm: Span = fleet.call_one(
                "workflows", count=max(10, profile.workflows // 20), threads=threads
            )
            count = bench.sized(_rate(warm), profile.workflows)
            values = [
                _rate(fleet.call_one("workflows", count=count, threads=threads))
                for _ in range(profile.repetitions)
            ]
            bench.add(
                Measurement(
                    "workflows",
                    f"3-step no-op workflow, {threads} caller threads",
                    DBOS.name,
                    "workflows/s",
                    "higher",
                    values,
                    {"workflows": count},
                )
            )
