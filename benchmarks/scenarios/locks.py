"""Lock acquire + release per second (querator only, on PostgreSQL), next to a
PostgreSQL advisory-lock loop in the same run.

- uncontended: one process, a lock (semaphore of 1) nobody else wants;
- contended: ``lock_contenders`` processes on a semaphore of 2 (advisory
  locks: two keys, each process tries both and otherwise waits on one).

A querator permit is a leased item (fencing token, lease that outlives a dead
holder's connection, listing of holders); an advisory lock is a session lock
of the server, released when its connection ends, without a token.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable

from benchmarks import lock_procs
from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.systems import QUERATOR

SCENARIO = "locks"
ADVISORY = "pg advisory lock"
SEMAPHORE = 2


def run(bench: Bench) -> None:
    """Acquire + release per second, uncontended and contended, both ways."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("locks", lambda: _measure(bench))


def _measure(bench: Bench) -> None:
    seconds = bench.profile.lock_seconds
    contenders = bench.profile.lock_contenders
    detail = {"seconds": seconds, "contenders": contenders, "semaphore": SEMAPHORE}
    with bench.fresh_database(QUERATOR) as dsn:
        cases: list[tuple[str, str, Callable[[int], float]]] = []
        for count, limit, case in (
            (1, 1, "uncontended (1 process, a lock)"),
            (contenders, SEMAPHORE, f"{contenders} processes, a semaphore of {SEMAPHORE}"),
        ):
            cases.append((case, QUERATOR.name, _querator(dsn, count, limit, seconds)))
            cases.append((case, ADVISORY, _advisory(dsn, count, limit, seconds)))
        for case, system, measure in cases:
            values = [measure(rep) for rep in range(bench.profile.repetitions)]
            bench.add(Measurement(SCENARIO, case, system, "ops/s", "higher", values, detail))


def _querator(dsn: str, count: int, limit: int, seconds: float) -> Callable[[int], float]:
    def measure(rep: int) -> float:
        name = f"bench-{count}-{limit}-{rep}"
        return _together(count, seconds, lock_procs.querator_loop, (dsn, name, limit, seconds))

    return measure


def _advisory(dsn: str, count: int, keys: int, seconds: float) -> Callable[[int], float]:
    def measure(rep: int) -> float:
        return _together(count, seconds, lock_procs.advisory_loop, (dsn, keys, seconds))

    return measure


def _together(
    count: int, seconds: float, loop: Callable[..., int], args: tuple[object, ...]
) -> float:
    """Run ``count`` processes of ``loop(*args, start, results)`` that start their
    windows together; the acquire + release pairs per second of all of them."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(count)
    results = context.SimpleQueue()
    procs = [
        context.Process(target=lock_procs.reporting, args=(loop, (*args, start), results))
        for _ in range(count)
    ]
    for proc in procs:
        proc.start()
    try:
        done = sum(int(results.get()) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=seconds + 60)
            if proc.is_alive():
                proc.kill()
    return done / seconds
