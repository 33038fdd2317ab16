"""Replaying a run: fetch its history, run the body, advance the run in one transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from querator.errors import Conflict, QueueNotFound
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQuerator
from querator.workflows.context import CURRENT, ReplayContext
from querator.workflows.functions import WorkflowFunction
from querator.workflows.layout import (
    PREFETCH,
    RESULTS_QUEUE,
    WORK_SETTINGS,
    RunMeta,
    RunRecord,
    StepRecord,
    error_info,
    meta_key,
    record_item,
    result_key,
    step_item,
    step_key,
)

log = logging.getLogger("querator.workflows")


@dataclass(frozen=True)
class History:
    """What is stored about a run."""

    meta: RunMeta | None
    records: dict[int, StepRecord]
    finished: RunRecord | None


async def load_history(aq: AsyncQuerator, run_id: str) -> History:
    """Meta, result and the contiguous prefix of step records, PREFETCH per lookup."""
    first = [meta_key(run_id), result_key(run_id)]
    records: dict[int, StepRecord] = {}
    start = 0
    meta = finished = None
    while True:
        keys = [step_key(run_id, i) for i in range(start, start + PREFETCH)]
        found = await aq.lookup(RESULTS_QUEUE, first + keys)
        if first:
            if meta_key(run_id) in found:
                meta = RunMeta.model_validate_json(found[meta_key(run_id)].payload)
            if result_key(run_id) in found:
                finished = RunRecord.model_validate_json(found[result_key(run_id)].payload)
            first = []
        for offset, key in enumerate(keys):
            if key not in found:
                return History(meta, records, finished)
            records[start + offset] = StepRecord.model_validate_json(found[key].payload)
        start += PREFETCH


def _in_context(ctx: ReplayContext, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    token = CURRENT.set(ctx)
    try:
        return fn(*args, **kwargs)
    finally:
        CURRENT.reset(token)


async def _run_body(wf: WorkflowFunction[..., Any], ctx: ReplayContext, args_text: str) -> Any:
    args, kwargs = wf.codec.decode_args(args_text)
    if not wf.is_async:
        return await anyio.to_thread.run_sync(_in_context, ctx, wf.fn, args, kwargs)
    token = CURRENT.set(ctx)
    try:
        return await wf.fn(*args, **kwargs)
    finally:
        CURRENT.reset(token)


async def evaluate(
    wf: WorkflowFunction[..., Any], ctx: ReplayContext, args_text: str
) -> RunRecord | None:
    """Run the body once; the run's final record, or None when ``ctx.dispatch`` is set."""
    error: Exception | None = None
    value: Any = None
    try:
        value = await _run_body(wf, ctx, args_text)
    except Exception as exc:
        error = exc
    if ctx.fatal is not None:
        return RunRecord(ok=False, error=error_info(ctx.fatal))
    if ctx.dispatch is not None:
        return None
    if error is None:
        try:
            return RunRecord(ok=True, result=wf.codec.encode_result(value))
        except Exception as exc:
            error = exc
    return RunRecord(ok=False, error=error_info(error))


async def replay(
    aq: AsyncQuerator, wake: Leased, run_id: str, wf: WorkflowFunction[..., Any], history: History
) -> None:
    """Replay ``run_id`` for the leased ``wake`` task and advance the run."""
    assert history.meta is not None
    ctx = ReplayContext(run_id, history.meta.queue, history.records)
    final = await evaluate(wf, ctx, history.meta.args)
    produce: dict[str, list[Item]] = {}
    if final is not None:
        produce[RESULTS_QUEUE] = [record_item(result_key(run_id), final, run_id)]
        log.info("run %s %s", run_id, "completed" if final.ok else f"failed: {final.error}")
    else:
        assert ctx.dispatch is not None
        queue, payload = ctx.dispatch
        produce[queue] = [step_item(payload)]
        log.debug("run %s dispatches step %s at %d", run_id, payload.step, payload.position)
    try:
        await transact_creating(aq, [wake], produce)
    except Conflict as exc:
        log.warning("run %s: wake task lost its lease, replay dropped (%s)", run_id, exc)


async def transact_creating(
    aq: AsyncQuerator, complete: list[Leased], produce: dict[str, list[Item]]
) -> None:
    """Complete and produce at once, creating a missing target queue first (once)."""
    try:
        await aq.transact(complete=complete, produce=produce)
    except QueueNotFound as exc:
        if exc.queue not in produce:
            raise
        await aq.create_queue(exc.queue, WORK_SETTINGS, exist_ok=True)
        await aq.transact(complete=complete, produce=produce)
