"""The ``retention_drain`` rounds on a store filled once and kept: long drains, many rounds.

Filling 200,000 finished runs takes minutes; measuring needs an idle machine.
So the two are apart: ``--fill START:END`` stores the finished runs ``START ..
END-1`` (:func:`benchmarks.scenarios.retention_drain.run_items`) and
``ANALYZE``s the store; ``--cycles N`` times ``N`` quiet drains and ``N``
beside a purge of those runs with each pause of ``--rest``
(:func:`~benchmarks.scenarios.retention_drain.drain_rounds`), each drain sized
to about ``--seconds`` at the warm-up's rate. Each call
appends its figures to ``--out`` (JSON lines), so rounds split across calls
are read together::

    python -m benchmarks.retention_store --url $KEPT --fill 0:200000
    python -m benchmarks.retention_store --url $KEPT --cycles 2 --seconds 60 --rest 4,9

``--rest`` sets the pause after each sweep, times the sweep's duration (several,
comma-separated: a purging drain with each; default: the worker's
:data:`~querator.workflows.engine.heartbeat.SWEEP_REST`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

from benchmarks.bulk_fill import analyze
from benchmarks.config import FULL
from benchmarks.context import Bench
from benchmarks.runner import RESULTS
from benchmarks.scenarios.retention_drain import (
    BATCH,
    CONSUMERS,
    drain_rounds,
    fill,
    timed_drain,
)
from benchmarks.systems import QUERATOR
from querator.workflows.engine.heartbeat import SWEEP_REST


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention_store")
    parser.add_argument("--url", required=True, help="the kept store (PostgreSQL)")
    parser.add_argument("--fill", help="START:END, the finished runs to store")
    parser.add_argument("--cycles", type=int, default=0, help="a quiet drain, one per --rest")
    parser.add_argument("--seconds", type=float, default=60.0, help="each drain's length")
    parser.add_argument("--rest", default=str(SWEEP_REST), help="pauses / sweep time, a,b,...")
    parser.add_argument("--out", type=Path, default=RESULTS / "retention_store.jsonl")
    args = parser.parse_args(argv)
    if args.fill:
        start, end = (int(n) for n in args.fill.split(":"))
        began = time.monotonic()
        anyio.run(fill, args.url, start, end)
        analyze(args.url)
        print(f"runs {start:,}..{end - 1:,} stored ({time.monotonic() - began:.0f} s)")
    if args.cycles:
        _measure(args)
    return 0


def _measure(args: argparse.Namespace) -> None:
    bench = Bench(FULL, [QUERATOR])
    load_before = os.getloadavg()
    rests = [float(r) for r in args.rest.split(",")]
    with bench.fleet(QUERATOR, CONSUMERS, args.url) as fleet:
        warm = timed_drain(bench, fleet, args.url, 20_000)
        count = int(warm * args.seconds)
        rounds = drain_rounds(bench, fleet, args.url, count, args.cycles, rests)
    figures = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "items": count,
        "consumers": CONSUMERS,
        "batch": BATCH,
        "quiet": rounds.quiet,
        "purging": [
            {
                "rest": p.rest,
                "rates": p.rates,
                "ratio": rounds.ratio(p),
                "purged": p.purged,
                "seconds": p.seconds,
                "pace": p.pace,
                "sweep_median": statistics.median(p.sweeps) if p.sweeps else None,
            }
            for p in rounds.purging
        ],
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "notes": bench.notes,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        out.write(json.dumps(figures) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    sys.exit(main())
