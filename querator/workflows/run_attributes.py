"""Search attributes in a workflow body (``set_attributes``) and a run's current ones.

```python
from querator.workflows import set_attributes

set_attributes({"stage": "shipped"})   # inside a workflow body
```

How they are stored and indexed: :mod:`querator.workflows.attributes`.
"""

from __future__ import annotations

from collections.abc import Mapping

from querator.errors import UsageError
from querator.queue.service import AsyncQueueClient
from querator.workflows.attributes import (
    AttributesRecord,
    AttributeValue,
    attributes_prefix,
    check_attributes,
    snapshot_key,
)
from querator.workflows.engine.context import CURRENT
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.stored import RunMeta

__all__ = [
    "current_attributes_async",
    "first_snapshot_key",
    "set_attributes",
    "set_attributes_async",
]


def set_attributes(attributes: Mapping[str, AttributeValue]) -> None:
    """Inside a workflow body: set these search attributes of the run (the others
    it holds are kept); ``list_runs(attributes=...)`` finds the run by its
    current values.

    Stored with the run's next commit (when the body next waits for something
    or ends), once: the call is a record of the run's history, so a replay
    (``querator runs replay`` included) finds it and writes nothing. Bad
    attributes, or more than 16 held at once, raise
    :class:`~querator.errors.InvalidArgument` in the body; outside a body,
    :class:`~querator.errors.UsageError`.
    """
    changes = check_attributes(attributes)
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("set_attributes() is called inside a workflow body only")
    ctx.set_attributes(changes)


async def set_attributes_async(attributes: Mapping[str, AttributeValue]) -> None:
    """:func:`set_attributes` for async workflow bodies."""
    set_attributes(attributes)


def first_snapshot_key(run_id: str) -> str:
    """The key of a run's first snapshot: looked up with its meta, it tells
    whether the run ever changed its attributes."""
    return snapshot_key(run_id, 1)


async def current_attributes_async(
    aq: AsyncQueueClient, metas: Mapping[str, RunMeta], changed: set[str]
) -> dict[str, AttributesRecord]:
    """The current attributes of runs by id: their start's (``metas``), or for the
    runs in ``changed`` (those with a first snapshot) their newest snapshot (one
    key scan each: the newest sorts first)."""
    current = {
        run_id: AttributesRecord(gen=0, values=meta.attributes) for run_id, meta in metas.items()
    }
    for run_id in changed & set(metas):
        page = await aq.scan_keys(RESULTS_QUEUE, attributes_prefix(run_id), limit=1)
        if page:
            current[run_id] = AttributesRecord.model_validate_json(page[0].payload)
    return current
