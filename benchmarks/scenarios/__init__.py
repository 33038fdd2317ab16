"""The scenarios, in the order a run performs them."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.context import Bench
from benchmarks.scenarios import (
    attribute_search,
    backlog,
    drain,
    e2e,
    embedded,
    idle,
    locks,
    messages,
    parked,
    partitions,
    pgbench,
    produce,
    retention_drain,
    run_listing,
    spark_stages,
    step_loop,
    tasks,
    webhooks,
    workflows,
)

Scenario = Callable[[Bench], None]

SCENARIOS: dict[str, Scenario] = {
    "pgbench": pgbench.run,
    "produce": produce.run,
    "drain": drain.run,
    "e2e": e2e.run,
    "idle": idle.run,
    "backlog": backlog.run,
    "partitions": partitions.run,
    "workflows": workflows.run,
    "embedded": embedded.run,
    "spark_stages": spark_stages.run,
    "step_loop": step_loop.run,
    "parked": parked.run,
    "webhooks": webhooks.run,
    "run_listing": run_listing.run,
    "attribute_search": attribute_search.run,
    "retention_drain": retention_drain.run,
    "locks": locks.run,
    "tasks": tasks.run,
    "messages": messages.run,
}
"""Scenario name -> function that measures it and records into the Bench."""
