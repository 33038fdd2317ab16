"""Replaying a run from its stored history: a body run over its records.

A replay happens on a *miss* only (the run's body is not live on the worker
that continues it: a crash, a lost lease, a step that ran elsewhere, an
eviction, a restart), for sagas being aborted or compensated, and in
:func:`querator.workflows.check_replay`. Every call with a stored record
returns it (its step name checked: a mismatch is :class:`NonDeterminism`);
the first call without one parks the body with its request.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from querator.clock import Clock
from querator.queue.service import AsyncQueueClient
from querator.workflows.attributes import AttributesRecord
from querator.workflows.engine.commit import Produce
from querator.workflows.engine.context import (
    Called,
    Load,
    Request,
    RunContext,
    awaited_steps,
    request_items,
)
from querator.workflows.engine.decisions import ended_early, finished_record
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import History, load_records
from querator.workflows.engine.live import LiveRun, body_fiber
from querator.workflows.engine.successor import ContinueAsNew
from querator.workflows.functions import WorkflowFunction
from querator.workflows.sagas.core import SagaFunction
from querator.workflows.stored import RunRecord, StepRecord, error_info

__all__ = [
    "SLOW_BODY",
    "Evaluation",
    "ended_early",
    "evaluate",
    "finished_record",
    "new_live",
    "resume",
]

log = logging.getLogger("querator.workflows")

SLOW_BODY = 0.1
"""Seconds a body may run between two parks before the worker logs a warning
(it runs on the worker's event loop: it should only orchestrate)."""


def new_live(
    run_id: str, wf: WorkflowFunction[..., Any], history: History, clock: Clock
) -> LiveRun:
    """A body over ``history``, not started yet, reading time from ``clock``."""
    meta = history.meta
    assert meta is not None
    ctx = RunContext(
        run_id,
        meta.queue,
        dict(history.records),
        dict(history.created),
        known=history.known,
        clock=clock,
        trace=meta.trace,
        workflow=meta.workflow,
        priority=meta.priority,
        attributes=AttributesRecord(gen=0, values=meta.attributes),
        started_at=meta.started_at,
    )
    return LiveRun(run_id, wf, meta, ctx, body_fiber(wf, ctx, meta.args))


async def resume(aq: AsyncQueueClient, live: LiveRun) -> Request | Finished:
    """Run the body until it parks on a request or ends (loading records it reaches)."""
    ctx = live.ctx
    while True:
        began = time.monotonic()
        message = await live.fiber.resume()
        took = time.monotonic() - began
        if took > SLOW_BODY:
            log.warning(
                "run %s: workflow %s ran %.3fs on the event loop between two calls; "
                "a workflow body should only orchestrate (do the work in steps)",
                live.run_id,
                live.wf.name,
                took,
            )
        if isinstance(message, Load):
            ctx.known, _ = await load_records(
                aq, live.run_id, ctx.records, ctx.created, ctx.known, message.position
            )
            continue
        if isinstance(message, Finished):
            return message
        if isinstance(message, ContinueAsNew):  # the body ends, continuing as new
            return Finished(value=message)
        return message  # type: ignore[return-value]


@dataclass
class Evaluation:
    """One replay of a body that is not kept: how far it got (a saga's input)."""

    final: RunRecord | None
    """The run's final record (None: the body waits on ``request``)."""
    records: dict[int, StepRecord]
    compensable: dict[int, Called]
    created: dict[int, datetime]
    fatal: Exception | None = None
    abort: RunRecord | None = None
    """A saga cancelled or past its deadline: why (``final`` is then None)."""
    request: Request | None = None
    awaited: list[tuple[str, int]] = field(default_factory=list)
    """(queue, position) of the steps the body waits on."""
    produce: Produce = field(default_factory=dict)
    """What the request asks to produce (nothing for an aborted saga)."""


async def evaluate(
    aq: AsyncQueueClient, run_id: str, wf: WorkflowFunction[..., Any], history: History
) -> Evaluation:
    """Replay the body over ``history`` to where it waits, then tear it down.

    A cancelled or timed-out run ends without its body, except a saga's: its
    body is replayed without dispatching anything, to learn what to compensate.
    """
    abort = ended_early(run_id, history, aq.clock.now())
    live = new_live(run_id, wf, history, aq.clock)
    ctx = live.ctx
    if abort is not None and not isinstance(wf, SagaFunction):
        return Evaluation(abort, ctx.records, ctx.compensable, ctx.created)
    try:
        message = await resume(aq, live)
    finally:
        await live.close()
    done = Evaluation(None, ctx.records, ctx.compensable, ctx.created, ctx.fatal, abort)
    if ctx.fatal is not None:
        done.final = RunRecord(ok=False, error=error_info(ctx.fatal))
    elif isinstance(message, Finished):
        done.final = None if abort is not None else finished_record(wf, message, run_id)
    else:
        done.request = message
        done.awaited = awaited_steps(message)
        if abort is None:
            done.produce = request_items(run_id, ctx, message, ctx.trace)
    return done
