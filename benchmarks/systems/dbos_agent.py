"""DBOS Transact 3.4: a three-step no-op workflow, the yardstick of querator's
workflow layer (``benchmarks/scenarios/workflows.py``), and ``send``/``recv``
(``benchmarks/scenarios/messages.py``).

DBOS is a process-wide singleton, so one agent process holds it; its system
database is the agent's throwaway database.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS, DBOSConfig

from benchmarks.systems.base import Agent, Span, peak_rss_kib


@DBOS.step()
def step_one() -> int:
    return 1


@DBOS.step()
def step_two(value: int) -> int:
    return value + 1


@DBOS.step()
def step_three(value: int) -> int:
    return value + 1


@DBOS.workflow()
def three_steps() -> int:
    return step_three(step_two(step_one()))


_REACHED = [0]
_REACHED_LOCK = threading.Lock()


@DBOS.workflow()
def recv_wake(timeout: float) -> float:
    """Wait for a message on ``ping`` (the wall-clock instant it was sent);
    seconds from the send to recv's return (-1.0: the timeout)."""
    with _REACHED_LOCK:
        _REACHED[0] += 1
    sent = DBOS.recv("ping", timeout_seconds=timeout)
    return -1.0 if sent is None else time.time() - float(sent)


def _vm_rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return peak_rss_kib()


class DbosAgent(Agent):
    """The DBOS runtime of this process, launched on the throwaway database."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        config: DBOSConfig = {
            "name": "qbench",
            "system_database_url": dsn,
            "log_level": "WARNING",
        }
        logging.getLogger("dbos").setLevel(logging.WARNING)
        DBOS(config=config)
        DBOS.launch()

    def install(self) -> None:
        """DBOS creates its tables at launch."""

    def workflows(self, count: int, threads: int) -> Span:
        """Run ``count`` workflows to completion from ``threads`` caller threads."""
        start = time.monotonic()
        if threads == 1:
            for _ in range(count):
                three_steps()
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda _: three_steps(), range(count)))
        return Span(start, time.monotonic(), count)

    def recv_latency(self, samples: int, pause: float) -> list[float]:
        """Seconds from ``DBOS.send`` to the waiting workflow's ``recv`` returning,
        one workflow per sample, each waiting ``pause`` seconds before the send."""
        found = []
        for _ in range(samples):
            before = _REACHED[0]
            handle = DBOS.start_workflow(recv_wake, 60.0)
            while _REACHED[0] == before:
                time.sleep(0.001)
            time.sleep(pause)
            DBOS.send(handle.get_workflow_id(), time.time(), "ping")
            found.append(float(handle.get_result()))
        return found

    def park_recv(self, runs: int, timeout: float, settle: float) -> dict[str, Any]:
        """Start ``runs`` workflows waiting in ``recv`` (for ``timeout`` s); return
        once every body reached it plus ``settle`` s: RSS before and after, KiB."""
        before = _vm_rss_kib()
        reached = _REACHED[0]
        began = time.monotonic()
        for _ in range(runs):
            DBOS.start_workflow(recv_wake, timeout)
        while _REACHED[0] < reached + runs:
            time.sleep(0.05)
        took = time.monotonic() - began
        time.sleep(settle)
        return {"rss_before_kib": before, "rss_parked_kib": _vm_rss_kib(), "seconds": took}

    def rss_now(self) -> int:
        """This process's resident set size now, KiB."""
        return _vm_rss_kib()

    def close(self) -> None:
        DBOS.destroy()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return DbosAgent(dsn)
