"""DBOS Transact 3.4: a three-step no-op workflow, the yardstick of querator's
workflow layer (``benchmarks/scenarios/workflows.py``).

DBOS is a process-wide singleton, so one agent process holds it; its system
database is the agent's throwaway database.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS, DBOSConfig

from benchmarks.systems.base import Agent, Span


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

    def close(self) -> None:
        DBOS.destroy()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return DbosAgent(dsn)
