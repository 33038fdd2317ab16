"""The ``attribute_search`` pages on stores filled once and kept, timed interleaved.

Filling 1,000,000 runs takes half an hour; timing needs an idle machine. So
the two are apart: ``--fill START:END`` stores the runs ``START .. END-1``
(:func:`benchmarks.scenarios.attribute_search.run_items`) in every store named
and ``ANALYZE``s them; ``--rounds N`` times each page of
:data:`~benchmarks.scenarios.attribute_search.CASES` ``--looks`` times on each
store in turn, ``N`` times over (so the stores are compared under the same
load), and prints every page's median and best time on each store::

    python -m benchmarks.attribute_store --url $SMALL --fill 0:10000
    python -m benchmarks.attribute_store --url $BIG --fill 0:1000000
    python -m benchmarks.attribute_store --url $SMALL --url $BIG --rounds 5 --looks 9
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
from benchmarks.runner import RESULTS
from benchmarks.scenarios.attribute_search import CASES, fill
from querator import Querator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attribute_store")
    parser.add_argument("--url", action="append", required=True, help="a kept store (repeat)")
    parser.add_argument("--fill", help="START:END, the runs to store in every store")
    parser.add_argument("--rounds", type=int, default=0, help="turns over the stores")
    parser.add_argument("--looks", type=int, default=9, help="calls of each page a turn")
    parser.add_argument("--out", type=Path, default=RESULTS / "attribute_store.jsonl")
    args = parser.parse_args(argv)
    if args.fill:
        start, end = (int(n) for n in args.fill.split(":"))
        for url in args.url:
            began = time.monotonic()
            anyio.run(fill, url, start, end)
            analyze(url)
            print(f"{url}: runs {start:,}..{end - 1:,} stored ({time.monotonic() - began:.0f} s)")
    if args.rounds:
        _time(args)
    return 0


def _time(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()
    times: dict[str, dict[str, list[float]]] = {url: {c: [] for c in CASES} for url in args.url}
    clients = [Querator(url) for url in args.url]
    try:
        for _ in range(args.rounds):
            for url, q in zip(args.url, clients, strict=True):
                for case, call in CASES.items():
                    for _ in range(args.looks):
                        began = time.perf_counter()
                        call(q)
                        times[url][case].append((time.perf_counter() - began) * 1000)
    finally:
        for q in clients:
            q.close()
    figures = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rounds": args.rounds,
        "looks": args.looks,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "ms": {
            url: {c: [statistics.median(v), min(v)] for c, v in cases.items()}
            for url, cases in times.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        out.write(json.dumps(figures) + "\n")
    for url, cases in figures["ms"].items():
        print(url)
        for case, (median, best) in cases.items():
            print(f"  {case:<32} {median:8.1f} ms median ({best:.1f} best)")
    print(f"load average {load_before[0]:.1f} -> {figures['load_after'][0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
