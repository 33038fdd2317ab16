"""Step progress: a running step reports how far it got; inspection shows it.

The last report of a step call is a record of the two-slot store
(:mod:`querator.queue.record_store`), keyed ``{run}/{position}/progress/a``
and ``/b`` (:class:`~querator.workflows.stored.ProgressRecord`): each report
is written into the slot that does not hold the current one, then the other
is deleted, so a reader always finds one. Best effort (a report racing
another one may be dropped), never part of the step's outcome, and kept
after the step ends (``get_run`` shows it).

```python
@step
def load(paths: list[str]) -> int:
    for i, path in enumerate(paths):
        ...
        report_progress({"done": i + 1, "of": len(paths)})
    return len(paths)
```
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio.from_thread
from typing_extensions import deprecated

from querator.errors import InvalidArgument, QueratorError, UsageError
from querator.queue.record_store import RecordStore
from querator.workflows.keys import RECORD_KIND, RESULTS_QUEUE, step_key
from querator.workflows.step_context import StepContext, current_step
from querator.workflows.stored import ProgressRecord

__all__ = ["areport_progress", "report_progress", "report_progress_async"]

log = logging.getLogger("querator.workflows")

MAX_PROGRESS_BYTES = 16 * 1024
"""The largest progress report accepted (as JSON)."""

PROGRESS = RecordStore(RESULTS_QUEUE, ProgressRecord, kind=RECORD_KIND, infix="/progress/")
"""Step calls' progress records, named by their step key (``{run}/{position}``);
their keys are :func:`~querator.workflows.keys.progress_key`'s."""


def _context() -> StepContext:
    ctx = current_step()
    if ctx is None:
        raise UsageError("report_progress() is for code running inside a step of a worker")
    return ctx


def _record(ctx: StepContext, progress: Mapping[str, Any]) -> ProgressRecord:
    if not isinstance(progress, Mapping):
        raise InvalidArgument("progress", f"must be a mapping, got {type(progress).__name__}")
    try:
        size = len(json.dumps(dict(progress)))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("progress", f"must be JSON: {exc}") from exc
    if size > MAX_PROGRESS_BYTES:
        raise InvalidArgument("progress", f"must be at most {MAX_PROGRESS_BYTES} bytes of JSON")
    return ProgressRecord(attempt=ctx.attempt, progress=dict(progress))


async def _store(ctx: StepContext, record: ProgressRecord) -> None:
    try:
        await _replace(ctx, record)
    except QueratorError as exc:  # progress is best effort: the step goes on
        log.warning("run %s step %s: progress not stored: %s", ctx.run_id, ctx.step, exc)


async def _replace(ctx: StepContext, record: ProgressRecord) -> None:
    """Write the report into the slot not holding the current one, then drop the
    other: a reader finds at least one record at every instant."""
    name = step_key(ctx.run_id, ctx.position)
    current = await PROGRESS.read(ctx.aq, name)
    if await PROGRESS.write(ctx.aq, name, current, record, reference=ctx.run_id) is None:
        log.debug("run %s step %s: a report raced this one; dropped", ctx.run_id, ctx.step)


async def report_progress_async(progress: Mapping[str, Any]) -> None:
    """Store ``progress`` (a JSON mapping, at most 16 KiB) as the running step
    call's latest progress, in an async step. See :func:`report_progress`."""
    ctx = _context()
    await _store(ctx, _record(ctx, progress))


def report_progress(progress: Mapping[str, Any], *, context: StepContext | None = None) -> None:
    """Store ``progress`` (a JSON mapping, at most 16 KiB) as the running step
    call's latest progress, replacing its previous report; ``get_run`` and
    ``querator runs show`` show it. For sync steps (they run in worker threads)
    and threads they start with ``contextvars.copy_context()``, or any thread
    given the step's ``context`` (``current_step()`` in the step); raises
    :class:`~querator.errors.UsageError` outside a step."""
    ctx = context if context is not None else _context()
    record = _record(ctx, progress)
    anyio.from_thread.run(_store, ctx, record, token=ctx.token)


@deprecated("areport_progress is deprecated: use report_progress_async")
async def areport_progress(progress: Mapping[str, Any]) -> None:
    """Deprecated alias of :func:`report_progress_async` (removed in the next minor version)."""
    await report_progress_async(progress)
