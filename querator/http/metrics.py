"""``GET /metrics``: queue depths in the Prometheus text format (a first cut:
one stats call per queue, at scrape time)."""

from __future__ import annotations

from querator.queue.service import AsyncQueueClient

PAGE = 500
GAUGES = (
    ("querator_queue_items", "total", "Items in the queue."),
    ("querator_queue_leased", "leased", "Items under a live lease."),
    ("querator_queue_scheduled", "scheduled", "Items not yet due."),
    ("querator_queue_dead_lettered", "dead_lettered", "Items that arrived by dead-lettering."),
)
"""Metric name, QueueStats property, help text."""


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


async def prometheus_text(aq: AsyncQueueClient) -> str:
    """Every queue's item, leased, scheduled and dead-lettered counts."""
    rows: dict[str, list[str]] = {name: [] for name, _, _ in GAUGES}
    pivot: str | None = None
    while True:
        page = await aq.list_queues(pivot, PAGE + 1)
        for info in page[:PAGE]:
            stats = await aq.stats(info.name)
            label = f'{{queue="{_label(info.name)}"}}'
            for name, field, _ in GAUGES:
                rows[name].append(f"{name}{label} {getattr(stats, field)}")
        if len(page) <= PAGE:
            break
        pivot = page[PAGE].name
    lines = []
    for name, _, help_text in GAUGES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *rows[name]]
    return "\n".join(lines) + "\n"
