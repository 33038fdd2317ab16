"""Priorities against a backlog, with consumer processes: 100 high-priority items
produced after 10,000 low-priority ones are all leased before the 200th low one,
also when they arrive while the backlog is being drained (PostgreSQL, SQLite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from polling import wait_for

from querator import Item, Querator, QueueSettings

ROOT = Path(__file__).resolve().parents[2]
BACKLOG = 10_000
URGENT = 100

_CONSUMER = """
import sys
from querator import Querator
from querator.errors import RequestTimeout
url, queue, out, stop, me = sys.argv[1:]
with Querator(url) as q, open(out, "a", buffering=1) as log:
    while True:
        try:
            got = q.lease(queue, client_id=me, batch_size=10, timeout=0.2)
        except RequestTimeout:
            got = []
        if got:
            log.write("".join(item.payload.decode() + "\\n" for item in got))
            q.complete(queue, got)
        elif __import__("os").path.exists(stop):
            break
"""


def _start(url: str, queue: str, tmp_path: Path, n: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CONSUMER,
            url,
            queue,
            str(tmp_path / f"leased-{n}.log"),
            str(tmp_path / "stop"),
            f"consumer-{n}",
        ],
        cwd=ROOT,
        env=dict(os.environ),
    )


def _logs(tmp_path: Path) -> dict[str, list[str]]:
    """Each consumer's leased payloads, in its lease order."""
    return {log.name: log.read_text().splitlines() for log in tmp_path.glob("leased-*.log")}


def _count(tmp_path: Path, prefix: str) -> int:
    return sum(p.startswith(prefix) for log in _logs(tmp_path).values() for p in log)


def _lows_first(logs: dict[str, list[str]], urgent: str, since: dict[str, int]) -> int:
    """The low items leased before the last ``urgent`` item, after line
    ``since[name]`` of each consumer's log, summed over consumers: a bound of how
    many low items were leased from ``since`` to the last urgent one."""
    lows = 0
    for name, log in logs.items():
        found = [n for n, payload in enumerate(log) if payload.startswith(urgent)]
        if found:
            lows += sum(p.startswith("low") for p in log[since.get(name, 0) : found[-1]])
    return lows


def _mixed(logs: dict[str, list[str]], urgent: str) -> int:
    """Low items a consumer leased between its first and its last ``urgent`` one."""
    mixed = 0
    for log in logs.values():
        found = [n for n, payload in enumerate(log) if payload.startswith(urgent)]
        if found:
            mixed += sum(p.startswith("low") for p in log[found[0] : found[-1]])
    return mixed


def _produce_urgent(q: Querator, queue: str, tag: str) -> None:
    q.produce(queue, [Item(payload=f"{tag} {n}".encode(), priority=10) for n in range(URGENT)])


def test_urgent_items_produced_after_a_backlog_are_leased_before_the_200th_low_one(
    shared_url: str, qname: str, tmp_path: Path
) -> None:
    with Querator(shared_url) as q:
        q.create_queue(qname, QueueSettings())
        for start in range(0, BACKLOG, 1_000):
            q.produce(
                qname, [Item(payload=f"low {n}".encode()) for n in range(start, start + 1_000)]
            )  # priority 0: the queue used no priorities until the urgent items come
        _produce_urgent(q, qname, "urgent")
        consumers = [_start(shared_url, qname, tmp_path, n) for n in range(2)]
        try:
            wait_for(lambda: _count(tmp_path, "urgent") == URGENT, timeout=60, message="urgent")
            # Again while the consumers drain the backlog, now without priorities.
            wait_for(lambda: _count(tmp_path, "low") >= 100, timeout=30, message="draining")
            _produce_urgent(q, qname, "later")
            since = {name: len(log) for name, log in _logs(tmp_path).items()}
            wait_for(lambda: _count(tmp_path, "later") == URGENT, timeout=60, message="later")
        finally:
            (tmp_path / "stop").touch()
            for consumer in consumers:
                consumer.kill()
                consumer.wait(timeout=30)

    logs = _logs(tmp_path)
    first = _lows_first(logs, "urgent", {})
    assert first < 200, f"{first} low items were leased before the last urgent one"
    # Produced while the backlog drains: once produced, the leases that began
    # after (all but at most one in flight per consumer) take them first.
    later = _lows_first(logs, "later", since)
    assert later < 200, f"{later} low items were leased before the last later urgent one"
    assert _mixed(logs, "urgent") == _mixed(logs, "later") == 0
