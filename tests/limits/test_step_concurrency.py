"""Concurrency limits of steps, enforced in the store across real worker
processes, with SIGKILLs: no instant has more than the limit running per key."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from limits import limited_flows
from querator import Querator
from querator.workflows import start

WORKER = Path(__file__).with_name("limited_worker.py")


def spawn(url: str, n: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LIMITS_LOG": str(log)}
    return subprocess.Popen([sys.executable, str(WORKER), url, f"limited-{n}"], env=env)


def most_at_once(log: Path, killed: dict[int, int]) -> dict[str, int]:
    """The most intervals open at one instant, per key; an interval of a killed
    process without an exit ends at the instant it was certainly dead."""
    opened: dict[tuple[str, str], list[int]] = defaultdict(list)
    events: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        what, at, key, pid = line.split()
        if what == "enter":
            opened[key, pid].append(int(at))
            events[key].append((int(at), 1))
        else:
            opened[key, pid].pop(0)
            events[key].append((int(at), -1))
    for (key, pid), left in opened.items():
        for _ in left:
            events[key].append((killed[int(pid)], -1))
    most: dict[str, int] = {}
    for key, seen in events.items():
        inside = top = 0
        for _, change in sorted(seen):  # an exit at an enter's instant counts first
            inside += change
            top = max(top, inside)
        most[key] = top
    return most


def test_never_more_than_the_limit_per_key_with_kills(shared_url: str, tmp_path: Path) -> None:
    rng = random.Random(31)
    log = tmp_path / "held.log"
    log.touch()
    procs = [spawn(shared_url, n, log) for n in range(3)]
    killed: dict[int, int] = {}
    try:
        with Querator(shared_url) as q:
            handles = [start(q, limited_flows.burst, tenant, 30) for tenant in "abc"]
            shared = start(q, limited_flows.shared, 4)
            for n in range(4):
                time.sleep(rng.uniform(0.3, 0.6))  # pacing of the chaos, not a wait
                victim = rng.randrange(len(procs))
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                killed[procs[victim].pid] = time.monotonic_ns()
                procs[victim] = spawn(shared_url, 3 + n, log)
            for handle in handles:
                assert handle.result(timeout=120) == list(range(30))
            assert sorted(shared.result(timeout=120)) == sorted(
                [*range(4), *(-i for i in range(4))]
            )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    most = most_at_once(log, killed)
    assert most["shared"] == 1
    assert all(most[tenant] <= limited_flows.LIMIT for tenant in "abc"), most
    assert any(most[tenant] == limited_flows.LIMIT for tenant in "abc"), most  # it ran in parallel
