"""Eager start: the caller runs a new run's first steps itself (``start(..., eager=True)``).

As Temporal's eager workflow start and DBOS's direct execution do, the caller
that starts a run drives it in its own process for as long as it can, with the
engine a worker uses (:class:`~.driver.Engine`), and nothing else changes:

- The body runs first, before anything is written. When it begins with a step
  this caller may run (one of the workflow's queue; a step routed to another
  queue is for its pool), the run's start records and that step's item are
  committed together, the item *produced already leased to the caller*: no
  start wake, one transaction fewer. Otherwise the start wake is what is
  produced leased to the caller, and the caller handles it as a worker would.
- Every step then runs under its own lease, renewed while it runs, and each
  commit carries the next step item leased to the caller again, exactly as on
  a worker. Versions are checked and replays stay deterministic: the caller
  is one more worker of the run.
- It stops when the run ends, or when the body parks on something the caller
  does not run (a timer, a message, a fan-out, a child, a step of another
  queue, a step's retry): what the body waits for is committed, the body is
  torn down, and the workers go on from what is stored (a replay, as on any
  miss).
- A caller that dies holds only leases: they expire (a step item's lease is
  the step queue's short one) and a worker leases the item and goes on.
  Nothing it completed is lost, since each step committed with its record.
  An item produced leased wakes nobody, so once the run is stored the caller
  wakes its queue's workers (a notification sent beside the first step, not
  in the commit: a waking commit takes PostgreSQL's slow path): their next
  look sees the caller's lease and when it ends (each look then sees the
  next one), so an idle worker is not left waiting out its wait cap (60 s)
  when the caller dies.

A failure after the run was stored (a lost lease, the store going away) does
not fail the start: it is logged, and the workers go on once the leases
expire. Before that, it raises as ``start`` does.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import current_token

from querator.queue.harness import Renewer
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import Produce, merge_items, split_claim, transact_creating
from querator.workflows.engine.committer import Claimed
from querator.workflows.engine.context import StepCall, request_items
from querator.workflows.engine.decisions import Park, next_move
from querator.workflows.engine.driver import Engine
from querator.workflows.engine.execute import StepRunner
from querator.workflows.engine.history import started
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.poison import decode
from querator.workflows.engine.replay import new_live, resume
from querator.workflows.engine.served import Served
from querator.workflows.functions import WorkflowFunction
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.stored import RunMeta, RunRecord, WakePayload, start_items

__all__ = ["CALLER_ID", "run_eagerly"]

log = logging.getLogger("querator.workflows")

CALLER_ID = f"caller-{os.getpid()}-{secrets.token_hex(4)}"
"""The lease owner of the items an eager caller holds (one per process)."""

CALLER_LIVE_RUNS = 16
"""Live bodies one eager start keeps (its own run's, and all torn down when it returns)."""


async def run_eagerly(
    aq: AsyncQueueClient, fn: WorkflowFunction[..., Any], run_id: str, meta: RunMeta
) -> RunRecord | None:
    """Store the new run ``run_id`` (``meta``, no delay, no idempotency key) and
    drive it here as far as this caller can (see the module doc): its final
    record when it ended here. Raises what storing the run raised."""
    endings: dict[str, RunRecord] = {}
    renewer = Renewer(aq, log, "step item")
    token = current_token()
    runner = StepRunner(aq, renewer, {}, lambda: token, CALLER_ID)
    engine = Engine(
        aq,
        Served([fn]),
        runner,
        CALLER_ID,
        CALLER_LIVE_RUNS,
        lambda: True,
        {},
        ended=endings.__setitem__,
    )
    failed: Exception | None = None
    renewing = anyio.CancelScope()

    async def renew() -> None:
        with renewing:
            await renewer.run()

    async with anyio.create_task_group() as group:  # the renewer runs beside the run
        group.start_soon(renew)
        stored = _Stored(aq, group, meta.queue)
        try:
            await _drive(aq, engine, fn, run_id, meta, stored)
        except Exception as exc:
            if not stored.done:
                failed = exc  # raised as itself, not in the group's ExceptionGroup
            else:
                log.exception(
                    "run %s: its eager start stopped; workers go on once its leases expire",
                    run_id,
                )
        finally:
            with anyio.CancelScope(shield=True):
                await engine.close()
            renewing.cancel()  # the workers' wakeup, if started, is sent still
    if failed is not None:
        raise failed
    return endings.get(run_id)


class _Stored:
    """Whether the run is stored yet; once it is, its queue's workers are woken
    (see the module doc), beside the run, by a task of ``group``."""

    def __init__(self, aq: AsyncQueueClient, group: TaskGroup, queue: str) -> None:
        self.done = False
        self._aq = aq
        self._group = group
        self._queue = queue

    def now(self) -> None:
        """The run was just stored."""
        self.done = True
        self._group.start_soon(self._wake)

    async def _wake(self) -> None:
        try:
            await self._aq.commit(wake=[self._queue])
        except Exception as exc:  # the leases still end: workers look within their wait cap
            log.warning("could not wake the workers of %r: %s", self._queue, exc)


async def _drive(
    aq: AsyncQueueClient,
    engine: Engine,
    fn: WorkflowFunction[..., Any],
    run_id: str,
    meta: RunMeta,
    stored: _Stored,
) -> None:
    """Run the body to its first request, store the run with it, and go on."""
    live = new_live(run_id, fn, started(meta), aq.clock)
    try:
        first = await resume(aq, live)
    except BaseException:
        await live.close()
        raise
    start = start_items(run_id, meta)
    wakes = start.pop(meta.queue)  # the start wake (and a deadline's wake, kept)
    if wakes[1:]:
        start[meta.queue] = wakes[1:]
    if isinstance(first, StepCall) and isinstance(next_move(live, first, False), Park):
        claimed = await _store_with_step(engine, live, first, start, stored)
        if claimed is not None:
            await engine.go_on(live, claimed)
        return
    await live.close()  # the caller handles its start wake, as a worker would
    result = await transact_creating(aq, [], start, {meta.queue: wakes[:1]}, CALLER_ID)
    stored.now()
    [wake] = result.leased.get(meta.queue, [None])
    if wake is not None:
        await engine.wake(wake, decode(WakePayload, wake))


async def _store_with_step(
    engine: Engine, live: LiveRun, request: StepCall, start: Produce, stored: _Stored
) -> Claimed | None:
    """Commit the run's start records with its first step's item (leased to the
    caller when it runs that step); the body is then kept, parked on the step.
    The step item the caller holds, or None (a worker runs it)."""
    run_id = live.run_id
    items = request_items(run_id, live.ctx, request, live.meta.trace)
    payloads = {items[request.queue][0].dedup_key or "": request.payload}
    rest, claim = split_claim(items, payloads, engine.served.can_run)
    published = live.ctx.take_published()  # set_event before the first step
    produce = merge_items(start, rest, {RESULTS_QUEUE: published} if published else {})
    try:
        if claim is None:
            await transact_creating(engine.aq, [], produce)
        else:
            lookup = {RESULTS_QUEUE: claim.payload.start_keys()}
            claims = {claim.queue: [claim.item]}
            result = await transact_creating(
                engine.aq, [], produce, claims, CALLER_ID, lookup=lookup
            )
    except BaseException:
        await live.close()
        raise
    stored.now()
    if claim is None:
        await live.close()
        return None
    live.request = request
    engine.live.keep(live)
    [mine] = result.leased.get(claim.queue, [None])
    if mine is None:
        return None  # produced, but not leasable now: the queue hands it out
    return mine, claim.payload, result.found.get(RESULTS_QUEUE, {})
