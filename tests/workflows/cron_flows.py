"""Workflows used by the cron schedule tests (importable by subprocesses)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

from querator import Querator
from querator.workflows import workflow
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.stored import RunMeta


@workflow(name="cron.record")
def record(label: str, tick: datetime) -> str:
    """Returns its label and the tick it was started for."""
    return f"{label}@{tick.isoformat()}"


@workflow(name="cron.plain")
def plain() -> int:
    return 1


@workflow(name="cron.decorated", schedule="*/5 * * * *")
def decorated() -> int:
    return 5


def runs_per_tick(q: Querator, workflow_name: str = "cron.record") -> Counter[str]:
    """How many runs of ``workflow_name`` each tick started (by tick ISO text)."""
    counts: Counter[str] = Counter()
    try:
        pivot = None
        while True:
            page = q.list_items(RESULTS_QUEUE, pivot=pivot, limit=500)
            for item in page:
                if item.id == pivot or not (item.dedup_key or "").endswith("/meta"):
                    continue
                meta = RunMeta.model_validate_json(item.payload)
                if meta.workflow == workflow_name:
                    counts[json.loads(meta.args).get("tick", "")] += 1
            if len(page) < 500:
                return counts
            pivot = page[-1].id
    except Exception as exc:  # the results queue does not exist yet
        if type(exc).__name__ == "QueueNotFound":
            return counts
        raise


@workflow(name="cron.every_second", schedule="* * * * * *")
def every_second(tick: datetime) -> str:
    return tick.isoformat()


@workflow(name="cron.text_tick", schedule="0 * * * *")
def text_tick(tick: str) -> str:
    """Annotated ``str``: receives the tick as ISO text."""
    return f"{type(tick).__name__}:{tick}"
