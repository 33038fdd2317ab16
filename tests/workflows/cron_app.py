"""An app with a workflow that has no ``@workflow(schedule=...)``: the cron
process tests define its schedule with ``querator schedules create``."""

from __future__ import annotations

from querator.workflows import workflow


@workflow(name="cron_app.pipeline")
def pipeline(label: str, tick: str) -> str:
    """Returns its label and the tick (ISO text: ``tick`` is annotated ``str``)."""
    return f"{label}@{tick}"
