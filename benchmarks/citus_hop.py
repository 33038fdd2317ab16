"""The Citus coordinator's hop, and two namespaces on two nodes against one.

``python benchmarks/citus_hop.py [ROUNDS] [ITEMS] [RUNS]`` starts two
throwaway servers as the tests do: a plain PostgreSQL cluster
(``tests/faults/cluster.py``) and a Citus cluster, a coordinator and two
workers (``tests/citus/cluster.py``), every server with the same settings
(``fsync=off``, small buffers) on this machine. Then, ROUNDS times, each
case in turn, each namespace measured in a process of its own:

- **drain**: ITEMS items produced (batches of 100, untimed) into a queue of
  one partition, then drained by one consumer leasing and completing batches
  of 100: items/s;
- **workflows**: RUNS 3-step no-op workflows started at once and served by
  one worker (8 slots) in the measuring process, after 20 to warm up: runs/s;

each in one namespace on plain PostgreSQL, in one on the coordinator, and in
two at once on the coordinator: placed on two worker nodes, or both on one
(and two at once on plain PostgreSQL, for reference). Two at once report the
sum of both. Prints a table of medians (with every round) and one JSON line.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))  # the throwaway clusters

from querator import Item, Querator, QueueSettings
from querator.queue.backends.namespaces import with_namespace
from querator.workflows import DurableFunction, Worker, start, step, workflow

BATCH = 100
QUEUE = "bench-drain"
WARM_RUNS = 20


@step(name="bench.hop.add")
def add(x: int) -> int:
    return x + 1


@workflow(name="bench.hop.three")
def three(x: int) -> int:
    return add(add(add(x)))


SERVED: list[DurableFunction] = [three]


def _drain(url: str, items: int, barrier: Barrier) -> float:
    with Querator(url) as q:
        if QUEUE not in {info.name for info in q.list_queues()}:
            q.create_queue(QUEUE, QueueSettings(partitions=1))
        for first in range(0, items, BATCH):
            q.produce(QUEUE, [Item(payload=b"%d" % n) for n in range(first, first + BATCH)])
        barrier.wait()
        began = time.monotonic()
        done = 0
        while done < items:
            leased = q.lease(QUEUE, client_id="bench", batch_size=BATCH, timeout=5)
            q.complete(QUEUE, leased)
            done += len(leased)
        return done / (time.monotonic() - began)


def _workflows(url: str, runs: int, barrier: Barrier) -> float:
    with Querator(url) as q:
        worker = Worker(q, SERVED, concurrency=8)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            for handle in [start(q, three, n) for n in range(WARM_RUNS)]:
                handle.result(timeout=600)
            barrier.wait()
            began = time.monotonic()
            handles = [start(q, three, n) for n in range(runs)]
            for handle in handles:
                handle.result(timeout=600)
            return runs / (time.monotonic() - began)
        finally:
            worker.stop()
            thread.join()


KINDS: dict[str, Callable[[str, int, Barrier], float]] = {
    "drain": _drain,
    "workflows": _workflows,
}


def _child(
    kind: str, url: str, size: int, barrier: Barrier, out: multiprocessing.Queue[float]
) -> None:
    out.put(KINDS[kind](url, size, barrier))


def _measure(kind: str, urls: list[str], size: int) -> float:
    """``kind`` in each of ``urls`` at once, one process each; the sum of their rates."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(urls))
    out: multiprocessing.Queue[float] = context.Queue()
    procs = [context.Process(target=_child, args=(kind, url, size, barrier, out)) for url in urls]
    for proc in procs:
        proc.start()
    rates = [out.get(timeout=900) for _ in procs]
    for proc in procs:
        proc.join()
    return sum(rates)


def main() -> None:
    from citus.cluster import CitusCluster
    from faults.cluster import Cluster

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    items = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    plain = Cluster.create()
    citus = CitusCluster.create()
    try:
        plain_url, citus_url = plain.url("bench"), citus.url("bench")
        for name in ("a", "b", "c"):  # the namespaces' schemas exist once opened
            with (
                Querator(with_namespace(citus_url, name)),
                Querator(with_namespace(plain_url, name)),
            ):
                pass
        node_a = citus.node_of("bench__a")
        other = next(w.port for w in citus.workers if w.port != node_a)
        for name, port in (("b", other), ("c", node_a)):  # b apart from a, c beside it
            if citus.node_of(f"bench__{name}") != port:
                citus.coordinator.execute(
                    "SELECT citus_schema_move(%s::regnamespace, '127.0.0.1', %s, 'block_writes')",
                    (f"bench__{name}", port),
                )
        p, c = (lambda n: with_namespace(plain_url, n)), (lambda n: with_namespace(citus_url, n))
        cases = {
            "1 namespace, plain PostgreSQL": [p("a")],
            "1 namespace, Citus (coordinator + worker)": [c("a")],
            "2 namespaces on 2 worker nodes, Citus": [c("a"), c("b")],
            "2 namespaces on 1 worker node, Citus": [c("a"), c("c")],
            "2 namespaces, plain PostgreSQL": [p("a"), p("b")],
        }
        rates: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for case, urls in cases.items():
                for kind, size in (("drain", items), ("workflows", runs)):
                    rates.setdefault((kind, case), []).append(_measure(kind, urls, size))
    finally:
        citus.destroy()
        plain.destroy()
    unit = {"drain": "items/s", "workflows": "3-step workflows/s"}
    print("| measure | case | median | rounds |")
    print("| --- | --- | --- | --- |")
    for (kind, case), values in rates.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"| {kind} ({unit[kind]}) | {case} | {statistics.median(values):,.0f} | {shown} |")
    figures = {
        f"{kind}: {case}": round(statistics.median(v), 1) for (kind, case), v in rates.items()
    }
    print(
        json.dumps(
            {
                "items": items,
                "runs": runs,
                "rounds": rounds,
                **figures,
                "load": os.getloadavg()[0],
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
