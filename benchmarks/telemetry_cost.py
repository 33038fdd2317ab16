"""CPU per queue call (produce, lease, complete), in-process: the cost of the
telemetry code on the hot path, measured where it weighs most (no network).

Run as a script so that it measures whichever querator is first on PYTHONPATH
(a checkout without telemetry, this one, or this one with an SDK installed by a
``sitecustomize``): ``python benchmarks/telemetry_cost.py memory:// 3000``.
Prints one JSON line: µs of process CPU per call of each operation (the median
of 5 rounds), for one item per call and for 100 items per call.

``python benchmarks/telemetry_cost.py URL CYCLES BATCH`` only runs CYCLES
produce-lease-complete cycles of BATCH items, printing nothing: the loop to
count instructions of under ``valgrind --tool=callgrind`` (run it with two
CYCLES; the difference cancels the interpreter's start-up). ``TMP`` in URL is
replaced by a temporary directory (``sqlite:///TMP/q.db``).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

from querator import Item, Querator


def _round(q: Querator, queue: str, calls: int, batch: int) -> dict[str, float]:
    spent = {"produce": 0.0, "lease": 0.0, "complete": 0.0}
    items = [Item(payload=b"x" * 64) for _ in range(batch)]
    for _ in range(calls):
        began = time.process_time()
        q.produce(queue, items)
        leased_at = time.process_time()
        leased = q.lease(queue, client_id="w", batch_size=batch)
        completed_at = time.process_time()
        q.complete(queue, leased)
        done = time.process_time()
        spent["produce"] += leased_at - began
        spent["lease"] += completed_at - leased_at
        spent["complete"] += done - completed_at
    return {op: seconds * 1e6 / calls for op, seconds in spent.items()}


def main(url: str, calls: int) -> None:
    """Measure and print µs of CPU per call, per operation and batch size."""
    with tempfile.TemporaryDirectory() as tmp:
        url = url.replace("TMP", tmp)
        with Querator(url) as q:
            found: dict[str, float] = {}
            for batch in (1, 100):
                queue = f"cost-{batch}"
                q.create_queue(queue)
                n = calls if batch == 1 else max(1, calls // 20)
                _round(q, queue, n // 5, batch)  # warm up
                rounds = [_round(q, queue, n, batch) for _ in range(5)]
                for op in ("produce", "lease", "complete"):
                    found[f"{op} x{batch}"] = statistics.median(r[op] for r in rounds)
    print(json.dumps(found))


def cycles(url: str, count: int, batch: int) -> None:
    """``count`` produce-lease-complete cycles of ``batch`` items, untimed."""
    with tempfile.TemporaryDirectory() as tmp, Querator(url.replace("TMP", tmp)) as q:
        q.create_queue("cycles")
        items = [Item(payload=b"x" * 64) for _ in range(batch)]
        for _ in range(count):
            q.produce("cycles", items)
            q.complete("cycles", q.lease("cycles", client_id="w", batch_size=batch))


if __name__ == "__main__":
    if len(sys.argv) > 3:
        cycles(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    else:
        main(sys.argv[1], int(sys.argv[2]))
