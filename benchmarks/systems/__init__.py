"""The systems under test, by name, and how to load their agents lazily.

Importing this package imports no peer: each agent module is imported only in
the process that runs it, and only when the peer is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from benchmarks.systems.base import Agent


@dataclass(frozen=True, slots=True)
class System:
    """A system under test."""

    name: str
    label: str
    module: str
    requires: str | None = None
    """The importable package the system needs (None: always available)."""
    peer: bool = True
    """Peers are what querator's figures are compared with."""

    def available(self) -> bool:
        """True when its package can be imported here."""
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    def agent(self, dsn: str) -> Agent:
        """A new agent of this system (call in the process that will use it)."""
        module = importlib.import_module(self.module)
        agent: Agent = module.make_agent(dsn)
        return agent


QUERATOR = System("querator", "querator", "benchmarks.systems.querator_agent", peer=False)
QUERATOR_ASYNC = System(
    "querator-async",
    "querator (AsyncQuerator)",
    "benchmarks.systems.querator_async_agent",
    peer=False,
)
"""querator again, from async code: produce and drain only."""
PLAIN = System("plain", "plain SKIP LOCKED", "benchmarks.systems.plain")
PGQUEUER = System("pgqueuer", "PgQueuer 1.6", "benchmarks.systems.pgqueuer_agent", "pgqueuer")
PROCRASTINATE = System(
    "procrastinate", "Procrastinate 3.10", "benchmarks.systems.procrastinate_agent", "procrastinate"
)
QUERATOR_TASKS = System(
    "querator-tasks",
    "querator @task",
    "benchmarks.systems.querator_tasks_agent",
    peer=False,
)
"""querator's background tasks: ``defer`` / ``defer_many`` and the ``Worker`` (tasks scenario)."""
DBOS = System("dbos", "DBOS 3.4", "benchmarks.systems.dbos_agent", "dbos")
QUEUES = {s.name: s for s in (QUERATOR, PLAIN, PGQUEUER, PROCRASTINATE)}
"""Every lease-queue system, querator first."""
SYSTEMS = {
    **QUEUES,
    QUERATOR_ASYNC.name: QUERATOR_ASYNC,
    QUERATOR_TASKS.name: QUERATOR_TASKS,
    DBOS.name: DBOS,
}
"""Every system the harness knows (DBOS runs the workflow scenario only)."""
