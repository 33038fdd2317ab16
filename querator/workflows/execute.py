"""Running one step item: its function under a renewed lease, then one transaction."""

from __future__ import annotations

import functools
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from querator.errors import Conflict
from querator.queue.models import Leased
from querator.queue.service import AsyncQuerator
from querator.workflows.functions import StepFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    StepPayload,
    StepRecord,
    error_info,
    record_item,
    step_key,
    wake_item,
)
from querator.workflows.replay import transact_creating

log = logging.getLogger("querator.workflows")


class LeaseKeeper:
    """Renews one lease while a step runs; ``current`` is the latest version."""

    def __init__(self, aq: AsyncQuerator, leased: Leased, extend: float, period: float) -> None:
        self.current = leased
        self._aq = aq
        self._extend = extend
        self._period = period

    async def run(self) -> None:
        """Renew every ``period`` seconds until cancelled or the lease is lost."""
        while True:
            await anyio.sleep(self._period)
            try:
                with anyio.CancelScope(shield=True):
                    [self.current] = await self._aq.renew(
                        self.current.queue, [self.current], extend=self._extend
                    )
            except Conflict as exc:
                log.warning("step item %s lost its lease: %s", self.current.id, exc)
                return


async def _call(step: StepFunction[..., Any], args_text: str) -> str:
    args, kwargs = step.codec.decode_args(args_text)
    if step.is_async:
        value = await step.fn(*args, **kwargs)
    else:
        value = await anyio.to_thread.run_sync(functools.partial(step.fn, *args, **kwargs))
    return step.codec.encode_result(value)


async def _run_renewed(
    aq: AsyncQuerator, leased: Leased, step: StepFunction[..., Any], args_text: str
) -> tuple[Leased, str | BaseException]:
    info = await aq.get_queue(leased.queue)
    queue_timeout = info.settings.lease_timeout
    extend = step.lease_timeout or queue_timeout
    keeper = LeaseKeeper(aq, leased, extend, min(extend, queue_timeout) / 3)
    outcome: str | BaseException
    async with anyio.create_task_group() as tasks:
        if step.lease_timeout is not None:
            [keeper.current] = await aq.renew(leased.queue, [leased], extend=extend)
        tasks.start_soon(keeper.run)
        try:
            outcome = await _call(step, args_text)
        except Exception as exc:
            outcome = exc
        tasks.cancel_scope.cancel()
    return keeper.current, outcome


async def execute_step(
    aq: AsyncQuerator, leased: Leased, payload: StepPayload, step: StepFunction[..., Any]
) -> None:
    """Run the step of ``leased`` (unless it already ran) and record the outcome."""
    run_id, position = payload.run_id, payload.position
    key = step_key(run_id, position)
    wake = {payload.workflow_queue: [wake_item(run_id, str(position))]}
    if key in await aq.lookup(RESULTS_QUEUE, [key]):
        log.info("run %s step %s@%d already ran; waking the run", run_id, step.name, position)
        await transact_creating(aq, [leased], wake)
        return
    current, outcome = await _run_renewed(aq, leased, step, payload.args)
    if isinstance(outcome, BaseException):
        decision = step.retry.decide(outcome, current.attempts)
        log.info(
            "run %s step %s@%d attempt %d failed (%r); %s",
            run_id,
            step.name,
            position,
            current.attempts,
            outcome,
            f"retry in {decision.delay:.3f}s" if decision.retry else "giving up",
        )
        if decision.retry:
            retry_at = datetime.now(UTC) + timedelta(seconds=decision.delay)
            try:
                await aq.retry(current.queue, [current], retry_at=retry_at)
            except Conflict as exc:
                log.warning("run %s step %s: retry lost its lease: %s", run_id, step.name, exc)
            return
        record = StepRecord(
            step=step.name, ok=False, error=error_info(outcome), attempts=current.attempts
        )
    else:
        record = StepRecord(step=step.name, ok=True, result=outcome, attempts=current.attempts)
        log.info("run %s step %s@%d completed", run_id, step.name, position)
    produce = {RESULTS_QUEUE: [record_item(key, record, run_id)], **wake}
    try:
        await transact_creating(aq, [current], produce)
    except Conflict as exc:
        log.warning(
            "run %s step %s@%d: result dropped, lease lost: %s", run_id, step.name, position, exc
        )
