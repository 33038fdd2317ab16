"""Fairness of a step's concurrency limit between keys: one hot key with many
waiting calls and nine small keys with a few each, all limited to ``LIMIT``
running per key. How long do the small keys' calls wait?

``python benchmarks/limit_fairness.py URL [HOT] [SMALL] [WORKERS]``: HOT calls
of the hot key are started first (in runs of 100 spawned calls), then SMALL
calls of each of nine small keys; ``WORKERS`` worker processes
(``benchmarks/limit_fairness.py --worker URL``) serve them. Prints a table and
one JSON line: for the small keys, the wait from the start of their runs to
each call's entry (p50, p95, max) and when the last small call and the last
hot call entered. ``TMP`` in URL is replaced by a temporary directory; URL
``postgres`` is a throwaway database (:func:`benchmarks.pg.throwaway_database`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.limits import Concurrency
from querator.workflows import DurableFunction, Worker, gather, start, step, workflow

LIMIT = 2
WORK = 0.005
"""Seconds one call works."""
PER_RUN = 100


@step(name="bench.fair.call", concurrency=Concurrency(LIMIT, key=lambda key, i: key))
def call(key: str, i: int) -> int:
    with open(os.environ["FAIR_LOG"], "a", buffering=1) as out:
        out.write(f"{key} {time.time()}\n")
    time.sleep(WORK)
    return i


@workflow(name="bench.fair.batch")
def batch(key: str, first: int, count: int) -> int:
    return len(gather([call.spawn(key, first + i) for i in range(count)]))


SERVED: list[DurableFunction] = [batch]


def _store(url: str, tmp: str) -> AbstractContextManager[str]:
    if url == "postgres":
        from benchmarks.pg import throwaway_database

        return throwaway_database("fair")
    return nullcontext(url.replace("TMP", tmp))


def main() -> None:
    if sys.argv[1] == "--worker":
        with Querator(sys.argv[2]) as q:
            Worker(q, SERVED, concurrency=16).run()
        return
    hot = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    small = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    with tempfile.TemporaryDirectory() as tmp, _store(sys.argv[1], tmp) as url:
        log = Path(tmp) / "entries.log"
        log.touch()
        env = {**os.environ, "FAIR_LOG": str(log)}
        procs = [
            subprocess.Popen([sys.executable, __file__, "--worker", url], env=env)
            for _ in range(workers)
        ]
        try:
            with Querator(url) as q:
                runs = [start(q, batch, "hot", n, PER_RUN) for n in range(0, hot, PER_RUN)]
                began = time.time()
                runs += [start(q, batch, f"small-{k}", 0, small) for k in range(9)]
                for run in runs:
                    run.result(timeout=3_600)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
        entries = [line.split() for line in log.read_text().splitlines()]
    waits = sorted(float(at) - began for key, at in entries if key != "hot")
    hot_end = max(float(at) for key, at in entries if key == "hot") - began
    figures = {
        "hot": hot,
        "small_keys": 9,
        "small_each": small,
        "limit": LIMIT,
        "workers": workers,
        "small_wait_p50_s": round(statistics.median(waits), 3),
        "small_wait_p95_s": round(waits[int(len(waits) * 0.95) - 1], 3),
        "small_last_entry_s": round(waits[-1], 3),
        "hot_last_entry_s": round(hot_end, 3),
        "load": os.getloadavg()[0],
    }
    print("| hot calls | small calls | small wait p50 | p95 | last small | last hot |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(
        f"| {hot} | 9 x {small} | {figures['small_wait_p50_s']} s | {figures['small_wait_p95_s']} s"
        f" | {figures['small_last_entry_s']} s | {figures['hot_last_entry_s']} s |"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
