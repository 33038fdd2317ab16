"""Concurrent consumers never hold the same item at once (threads, tasks, processes)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from querator import AsyncQuerator, Item, Leased, Querator, QueueSettings
from querator.errors import Conflict, RequestTimeout

from .helpers import make_queue

WORKER = Path(__file__).with_name("lease_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


def numbered(count: int) -> list[Item]:
    return [Item(payload=str(i).encode()) for i in range(count)]


def test_threads_lease_each_item_exactly_once(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname, lease_timeout=60)
    ids = q.produce(qname, numbered(200))

    def consume(client: Querator, client_id: str) -> list[Leased]:
        mine: list[Leased] = []
        while True:
            try:
                batch = client.lease(qname, client_id=client_id, batch_size=7, timeout=0.5)
            except RequestTimeout:
                return mine
            mine.extend(batch)
            client.complete(qname, batch)

    futures = [pool.submit(consume, client, f"t{n}") for n, client in enumerate([q, q, q2, q2])]
    per_thread = [f.result(timeout=60) for f in futures]
    leased_ids = Counter(item.id for batch in per_thread for item in batch)

    assert sorted(leased_ids) == sorted(ids)
    assert max(leased_ids.values()) == 1, "an item was leased twice while held"
    assert q.stats(qname).total == 0


def test_no_two_leases_of_an_item_overlap(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    """Consumers abandon some first leases; expired items are re-leased, never early."""
    lease_timeout = 1.0
    make_queue(q, qname, lease_timeout=lease_timeout)
    ids = q.produce(qname, numbered(60))
    abandon = set(ids[::4])
    leases: list[Leased] = []
    finished: set[str] = set()
    lock = threading.Lock()
    give_up = time.monotonic() + 60

    def consume(client: Querator, client_id: str) -> None:
        while time.monotonic() < give_up:
            with lock:
                if len(finished) == len(ids):
                    return
            try:
                batch = client.lease(qname, client_id=client_id, batch_size=4, timeout=0.3)
            except RequestTimeout:
                continue
            keep = [b for b in batch if not (b.id in abandon and b.attempts == 1)]
            done = complete_what_still_holds(client, qname, keep)
            with lock:
                leases.extend(batch)
                finished.update(done)

    futures = [pool.submit(consume, client, f"t{n}") for n, client in enumerate([q, q, q2, q2])]
    for future in futures:
        future.result(timeout=90)

    assert finished == set(ids)
    by_id: dict[str, list[Leased]] = defaultdict(list)
    for lease in leases:
        by_id[lease.id].append(lease)
    for item_id, history in by_id.items():
        history.sort(key=lambda x: x.version)
        versions = [h.version for h in history]
        assert len(set(versions)) == len(versions), f"{item_id}: a version leased twice"
        for before, after in itertools.pairwise(history):
            leased_at = after.lease_deadline.timestamp() - lease_timeout
            overlap = before.lease_deadline.timestamp() - leased_at
            assert overlap <= 0.005, (
                f"{item_id}: leased by {after.client_id} {overlap:.3f}s before "
                f"{before.client_id}'s lease ended"
            )
    assert all(len(by_id[i]) >= 2 for i in abandon)
    assert q.stats(qname).total == 0


def complete_what_still_holds(client: Querator, queue: str, batch: list[Leased]) -> set[str]:
    """Complete ``batch``; items whose lease ran out meanwhile are left to be re-leased."""
    while batch:
        try:
            client.complete(queue, batch)
        except Conflict as err:
            batch = [b for b in batch if b.id not in err.reasons]
        else:
            return {b.id for b in batch}
    return set()


@pytest.mark.anyio
async def test_async_tasks_lease_each_item_exactly_once(aq: AsyncQuerator, qname: str) -> None:
    await aq.create_queue(qname, QueueSettings(lease_timeout=60))
    ids = await aq.produce(qname, numbered(100))
    seen: list[str] = []

    async def consume(client_id: str) -> None:
        while True:
            try:
                batch = await aq.lease(qname, client_id=client_id, batch_size=3, timeout=0.3)
            except RequestTimeout:
                return
            seen.extend(item.id for item in batch)
            await aq.complete(qname, batch)

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(consume, f"task-{n}")

    assert sorted(seen) == sorted(ids)
    assert len(seen) == len(set(seen))
    assert (await aq.stats(qname)).total == 0


def test_processes_lease_each_item_exactly_once(
    q: Querator, backend_name: str, backend_url: str, qname: str
) -> None:
    if backend_name == "memory":
        pytest.skip("a memory:// store lives inside one process")
    make_queue(q, qname, lease_timeout=60)
    ids = q.produce(qname, numbered(300))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }

    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), backend_url, qname, f"proc-{n}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                pytest.fail(f"a worker did not start:\n{proc.communicate(timeout=30)[1]}")
        for proc in procs:  # start them together, so that they compete
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=90) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    leased: list[str] = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, f"worker failed:\n{err}"
        leased.extend(item_id for item_id, _version in json.loads(out.strip().splitlines()[-1]))
    counts = Counter(leased)
    assert sorted(counts) == sorted(ids)
    assert max(counts.values()) == 1, "two processes leased the same item"
    assert q.stats(qname).total == 0
