"""The workflows of the ``step_loop``, ``parked`` (issue 16) and ``messages``
(issue 30) scenarios, and their worker.

Their worker is a process of its own (``python -c "from benchmarks.live_flows
import serve; serve(DSN, FLOW)"``), so this module imports querator and
nothing else of the harness: the worker's RSS is that of a worker serving
these functions, not of the benchmark's scenarios and their imports.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from querator import Querator
from querator.workflows import (
    StepFunction,
    Worker,
    WorkflowFunction,
    recv,
    sleep,
    step,
    workflow,
)

PARK_SECONDS = 3600.0
"""How long a parked run sleeps (the benchmark stops the worker long before)."""


@step(name="qbench.loop_noop")
def loop_noop(index: int) -> int:
    """The step of the loop: does nothing."""
    return index


@workflow(name="qbench.step_loop")
def step_loop(n: int) -> int:
    """``n`` no-op sync steps in a loop; returns ``n``."""
    for i in range(n):
        loop_noop(i)
    return n


@step(name="qbench.parked_noop")
def parked_noop(index: int) -> int:
    """The step before and after a parked run's sleep: does nothing."""
    return index


@workflow(name="qbench.parked")
def parked() -> int:
    """One step, a durable sleep of an hour, another step."""
    parked_noop(0)
    sleep(PARK_SECONDS)
    return parked_noop(1)


@workflow(name="qbench.recv_wake")
def recv_wake() -> float:
    """Wait for a message on ``ping`` (the wall-clock instant it was sent);
    seconds from the send to recv's return (-1.0: the hour passed)."""
    sent = recv("ping", timeout=PARK_SECONDS)
    return -1.0 if sent is None else time.time() - float(sent)


FLOWS: dict[str, list[StepFunction[..., Any] | WorkflowFunction[..., Any]]] = {
    "step_loop": [step_loop, loop_noop],
    "parked": [parked, parked_noop],
    "messages": [recv_wake],
}
"""What each scenario's worker serves: its workflow and its step."""


def serve(dsn: str, flow: str) -> None:
    """The worker process: ``Worker(q, FLOWS[flow])`` with default options until SIGTERM.

    Logs warnings and errors only (on stderr): a user's worker at INFO would log
    two lines per step, which is not what the scenarios measure.
    """
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Querator(dsn) as q:
        Worker(q, FLOWS[flow]).run()
