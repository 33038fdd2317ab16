"""Issue 5 on the embedded stores: the three-step no-op workflow with no server.

What a new user runs first (``sqlite:///file``, the default) and, for
reference, the in-memory store, whose cost is the workflow layer's own (replay,
codecs, records, routing, anyio) with no database at all. Everything runs in
this process, with the workflows scenario's functions: N runs are started,
then one ``AsyncWorker(concurrency=8)`` drains them; the time and the
process's CPU from the drain's start to the last result give workflows/s and
CPU per workflow. Each repetition uses a fresh store (a new file in a
temporary directory).
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks.context import Bench
from benchmarks.results import Better, Measurement
from benchmarks.systems import QUERATOR
from benchmarks.systems.querator_agent import WORKFLOW_FUNCTIONS, three_steps
from querator import AsyncQuerator
from querator.workflows import AsyncWorker

SCENARIO = "embedded"
CASE = "3-step no-op workflow, in-process worker x 8"
CONCURRENCY = 8
RESULT_TIMEOUT = 300.0
METRICS: tuple[tuple[str, Better], ...] = (
    ("start() calls/s", "higher"),
    ("workflows/s", "higher"),
    ("CPU ms/workflow", "lower"),
)
"""What each repetition yields, in :func:`_drain`'s order."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _drain(url: str, count: int) -> tuple[float, float, float]:
    """Start ``count`` runs, drain them: (starts/s, workflows/s, CPU ms per workflow)."""
    async with AsyncQuerator(url) as aq:
        worker = AsyncWorker(aq, WORKFLOW_FUNCTIONS, concurrency=CONCURRENCY)
        began = time.perf_counter()
        handles = [await aq.start(three_steps) for _ in range(count)]
        started = time.perf_counter() - began
        cpu, began = _cpu(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.arun)
            for handle in handles:
                await handle.result(timeout=RESULT_TIMEOUT)
            worker.stop()
            worker.stop()  # no grace period: nothing is left in hand
        took = time.perf_counter() - began
        return count / started, count / took, (_cpu() - cpu) * 1000 / count


def run(bench: Bench) -> None:
    """Workflows/s and CPU per workflow on SQLite and in memory (querator only)."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("embedded/querator", lambda: _measure(bench))


def _measure(bench: Bench) -> None:
    profile = bench.profile
    with tempfile.TemporaryDirectory(prefix="qbench-embedded-") as tmp:
        for label, url in (("SQLite file", f"sqlite:///{Path(tmp)}/run"), ("in-memory", "")):

            def store(tag: str, url: str = url) -> str:
                return f"{url}-{tag}.db" if url else "memory://"

            warm = anyio.run(_drain, store("warm"), max(20, profile.workflows // 20))
            count = bench.sized(warm[1], profile.workflows)
            rounds = [anyio.run(_drain, store(str(i)), count) for i in range(profile.repetitions)]
            for index, (metric, better) in enumerate(METRICS):
                bench.add(
                    Measurement(
                        SCENARIO,
                        f"{CASE}, {label}",
                        QUERATOR.name,
                        metric,
                        better,
                        [r[index] for r in rounds],
                        {"workflows": count, "concurrency": CONCURRENCY},
                    )
                )
