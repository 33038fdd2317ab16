"""Issue 20: webhook delivery to a local receiver, on PostgreSQL.

One delivery worker process (``DeliveryWorker``, default settings but
``allow_private``) and one receiver process (a bare asyncio HTTP server that
answers at once; see ``benchmarks/webhook_procs.py``). For each throughput
case a fresh database gets its endpoints and a warm-up delivery; the worker
is then paused (SIGSTOP), the backlog is sent, its CPU time read from
``/proc``, and it is resumed (SIGCONT): throughput is deliveries ÷ (last
arrival - resume), CPU is the worker's user + system time over the same
window. Cases: 1 endpoint, 100 endpoints (each message fans out to all),
10 endpoints with and without an 11th that hangs 30 s per request (its
deliveries are in the backlog too; only the 10 healthy ones are counted).
Latency: with the worker idle, one message at a time, ``send()`` called ->
the receiver's arrival (same machine, same wall clock).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.stats import median, percentile
from benchmarks.systems import QUERATOR
from querator import Querator
from querator.webhooks import Webhooks, WebhookSettings

SCENARIO = "webhooks"
ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 200
MAX_IN_FLIGHT = 10
"""Per endpoint (the default)."""
LATENCY_TARGET_MS = 20.0
ISOLATION_TARGET = 0.9
TIMEOUT = 300.0
SETTINGS = WebhookSettings(allow_private=True)


@dataclass
class Procs:
    """The receiver and worker of one case."""

    port: int
    worker: subprocess.Popen[bytes]

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=30) as answer:
            document: dict[str, Any] = json.loads(answer.read())
            return document

    def count(self, prefix: str = "/e") -> int:
        return int(sum(v[0] for p, v in self.stats()["paths"].items() if p.startswith(prefix)))

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spawn(code: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        **kwargs,
    )


@contextlib.contextmanager
def _procs(dsn: str) -> Iterator[Procs]:
    receiver = _spawn(
        "from benchmarks.webhook_procs import receive; receive()", stdout=subprocess.PIPE
    )
    worker = _spawn(
        f"from benchmarks.webhook_procs import deliver; deliver({dsn!r}, {CONCURRENCY})"
    )
    try:
        assert receiver.stdout is not None
        yield Procs(int(receiver.stdout.readline()), worker)
    finally:
        for proc in (worker, receiver):
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        for proc in (worker, receiver):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(what: str, ready: Any, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"webhooks: {what} not done within {timeout:.0f}s")
        time.sleep(0.02)


def run(bench: Bench) -> None:
    """Deliveries/s, per CPU-second, latency, isolation (when querator is chosen)."""
    if QUERATOR not in bench.systems:
        return
    size = max(200, bench.profile.drain_items // 5)
    bench.guarded("webhooks/throughput", lambda: _throughput(bench, size))
    bench.guarded("webhooks/latency", lambda: _latency(bench))
    bench.guarded("webhooks/isolation", lambda: _isolation(bench, size))


def _drain(bench: Bench, endpoints: int, messages: int, hanging: bool = False) -> dict[str, float]:
    """Deliver ``messages`` to ``endpoints`` healthy endpoints (plus a hanging one)."""
    with bench.fresh_database(QUERATOR) as dsn, Querator(dsn) as q, _procs(dsn) as procs:
        hooks = Webhooks(q, SETTINGS)
        for n in range(endpoints):
            hooks.add_endpoint(f"http://127.0.0.1:{procs.port}/e{n}")
        if hanging:
            hooks.add_endpoint(f"http://127.0.0.1:{procs.port}/hang")
        hooks.send("warm.up", {})
        _wait("warm-up", lambda: procs.count() >= endpoints, 60)
        warm = procs.count()
        procs.worker.send_signal(signal.SIGSTOP)
        for n in range(messages):
            hooks.send("bench.event", {"n": n, "pad": "x" * 200})
        cpu = procs.cpu()
        resumed = time.time()
        procs.worker.send_signal(signal.SIGCONT)
        total = warm + messages * endpoints
        _wait("the backlog", lambda: procs.count() >= total)
        stats = procs.stats()
        used = procs.cpu() - cpu
    last = max(v[2] for p, v in stats["paths"].items() if p.startswith("/e"))
    delivered = messages * endpoints
    return {
        "rate": delivered / (last - resumed),
        "per_cpu": delivered / used,
        "deliveries": delivered,
    }


def _throughput(bench: Bench, size: int) -> None:
    for endpoints in (1, 100):
        got = _drain(bench, endpoints, max(2, size // endpoints))
        case = (
            f"{endpoints} endpoint(s), backlog of {got['deliveries']:.0f}, receiver answers at once"
        )
        detail = {
            "deliveries": got["deliveries"],
            "concurrency": CONCURRENCY,
            "max_in_flight": MAX_IN_FLIGHT,
            "load": os.getloadavg()[0],
        }
        bench.add(
            Measurement(
                SCENARIO, case, QUERATOR.name, "deliveries/s", "higher", [got["rate"]], detail
            )
        )
        bench.add(
            Measurement(
                SCENARIO,
                case,
                QUERATOR.name,
                "deliveries per CPU-second",
                "higher",
                [got["per_cpu"]],
                detail,
            )
        )


def _latency(bench: Bench) -> None:
    samples = bench.profile.latency_samples
    with bench.fresh_database(QUERATOR) as dsn, Querator(dsn) as q, _procs(dsn) as procs:
        hooks = Webhooks(q, SETTINGS)
        hooks.add_endpoint(f"http://127.0.0.1:{procs.port}/e0")
        hooks.send("warm.up", {})
        _wait("warm-up", lambda: procs.count() >= 1, 60)
        sent: dict[str, float] = {}
        for n in range(samples):
            time.sleep(0.05)  # the worker is idle (waiting on its lease) when the send comes
            began = time.time()
            message = hooks.send("bench.event", {"n": n})
            sent[message.id] = began
            want = n + 2
            _wait("a delivery", lambda: procs.count() >= want, 30)  # noqa: B023
        arrivals = procs.stats()["arrivals"]
    ms = [(arrivals[i] - t) * 1000 for i, t in sent.items()]
    detail = {"samples": samples, "store": "PostgreSQL", "load": os.getloadavg()[0]}
    for label, pct in (("p50", 50.0), ("p99", 99.0)):
        bench.add(
            Measurement(
                SCENARIO,
                "send() -> received, idle worker",
                QUERATOR.name,
                f"ms latency {label}",
                "lower",
                [percentile(ms, pct)],
                detail,
            )
        )
    p50 = percentile(ms, 50.0)
    verdict = "met" if p50 < LATENCY_TARGET_MS else "MISSED"
    bench.note(
        f"webhooks: send -> received p50 {p50:.1f} ms; "
        f"target < {LATENCY_TARGET_MS:.0f} ms: {verdict}"
    )


def _isolation(bench: Bench, size: int) -> None:
    messages = max(20, size // 10)
    alone: list[float] = []
    beside: list[float] = []
    for _ in range(bench.profile.repetitions):  # alternated: the machine's load drifts
        alone.append(_drain(bench, 10, messages)["rate"])
        beside.append(_drain(bench, 10, messages, hanging=True)["rate"])
    detail = {"healthy_deliveries": messages * 10, "hang_s": 30, "load": os.getloadavg()[0]}
    for case, rates in (
        ("10 healthy endpoints", alone),
        ("10 healthy endpoints + 1 hanging 30 s per request (healthy counted)", beside),
    ):
        bench.add(
            Measurement(SCENARIO, case, QUERATOR.name, "deliveries/s", "higher", rates, detail)
        )
    kept = median(beside) / median(alone)
    verdict = "met" if kept >= ISOLATION_TARGET else "MISSED"
    bench.note(
        f"webhooks: healthy endpoints keep {kept:.0%} of their throughput beside a "
        f"hanging one (medians of {len(alone)} alternated runs); "
        f"target >= {ISOLATION_TARGET:.0%}: {verdict}"
    )
