"""Workflows per second of a 3-step run whose steps have a concurrency limit
that is never reached, next to the same run without a limit (the cost of
taking and handing back a permit per step).

``python benchmarks/limit_overhead.py URL [RUNS] [ROUNDS]``: one worker (8
slots) in this process; RUNS runs started at once per case; the cases
alternate ROUNDS times. Prints a table and one JSON line (runs/s, the median
of the rounds, and the load). ``TMP`` in URL is replaced by a temporary
directory; URL ``postgres`` is a throwaway database.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.limits import Concurrency
from querator.workflows import DurableFunction, Worker, start, step, workflow

ROOMY = Concurrency(1_000, name="bench-overhead")
"""A limit no run of the benchmark reaches."""


@step(name="bench.overhead.plain")
def plain(x: int) -> int:
    return x + 1


@step(name="bench.overhead.limited", concurrency=ROOMY)
def limited(x: int) -> int:
    return x + 1


@workflow(name="bench.overhead.plain_run")
def plain_run(x: int) -> int:
    return plain(plain(plain(x)))


@workflow(name="bench.overhead.limited_run")
def limited_run(x: int) -> int:
    return limited(limited(limited(x)))


SERVED: list[DurableFunction] = [plain_run, limited_run]


def _store(url: str, tmp: str) -> AbstractContextManager[str]:
    if url == "postgres":
        from benchmarks.pg import throwaway_database

        return throwaway_database("overhead")
    return nullcontext(url.replace("TMP", tmp))


def _rate(q: Querator, fn: object, runs: int) -> float:
    began = time.monotonic()
    handles = [start(q, fn, n) for n in range(runs)]  # type: ignore[call-overload]
    for handle in handles:
        handle.result(timeout=600)
    return runs / (time.monotonic() - began)


def main() -> None:
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rates: dict[str, list[float]] = {"without a limit": [], "with a limit never reached": []}
    with tempfile.TemporaryDirectory() as tmp, _store(sys.argv[1], tmp) as url, Querator(url) as q:
        worker = Worker(q, SERVED, concurrency=8)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            _rate(q, plain_run, 20)  # warm up: queues, permits
            _rate(q, limited_run, 20)
            for _ in range(rounds):
                rates["without a limit"].append(_rate(q, plain_run, runs))
                rates["with a limit never reached"].append(_rate(q, limited_run, runs))
        finally:
            worker.stop()
            thread.join()
    figures = {case: round(statistics.median(values), 1) for case, values in rates.items()}
    print("| case | runs/s (median) | rounds |")
    print("| --- | --- | --- |")
    for case, values in rates.items():
        print(f"| {case} | {figures[case]} | {', '.join(f'{v:.1f}' for v in values)} |")
    print(json.dumps({"runs": runs, "rounds": rounds, **figures, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
