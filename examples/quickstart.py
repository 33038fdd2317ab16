"""The querator quick start: a queue, a producer and three workers, on SQLite.

Run it with no server at all:  python examples/quickstart.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from querator import Item, Querator, QueueSettings
from querator.errors import RequestTimeout

ORDERS = 60


def worker(q: Querator, name: str, done: Counter[str], lock: threading.Lock) -> None:
    """Lease orders in batches until the queue stays empty for a second."""
    while True:
        try:
            batch = q.lease("orders", client_id=name, batch_size=5, timeout=1.0)
        except RequestTimeout:
            return
        failed = [item for item in batch if item.payload.endswith(b"7") and item.attempts == 1]
        finished = [item for item in batch if item not in failed]
        if failed:
            q.retry("orders", failed)  # a flaky first attempt: it comes back at the tail
        if finished:
            q.complete("orders", finished)
        with lock:
            done[name] += len(finished)


def demo(path: Path) -> None:
    """Produce orders, drain them with three workers, print what happened."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with Querator(f"sqlite:///{path}") as q:
        q.create_queue("orders-dead")
        q.create_queue(
            "orders",
            QueueSettings(lease_timeout=10, max_attempts=3, dead_queue="orders-dead", partitions=2),
        )
        ids = q.produce("orders", [Item(payload=f"order-{n}".encode()) for n in range(ORDERS)])
        print(f"produced {len(ids)} orders into 2 partitions of {path}")

        done: Counter[str] = Counter()
        lock = threading.Lock()
        threads = [
            threading.Thread(target=worker, args=(q, f"worker-{n}", done, lock)) for n in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        for name, count in sorted(done.items()):
            print(f"{name} completed {count} orders")
        stats = q.stats("orders")
        print(f"completed {sum(done.values())} of {ORDERS}; left in queue: {stats.total}")
        assert sum(done.values()) == ORDERS and stats.total == 0


def main() -> None:
    """Run the demo on ``argv[1]``, else on demo.db in a temporary directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "demo.db"))


if __name__ == "__main__":
    main()
