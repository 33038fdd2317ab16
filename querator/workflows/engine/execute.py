"""Running one step item: its function under a kept lease, then one transaction."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from anyio.lowlevel import current_token

from querator.errors import Conflict
from querator.queue.models import Leased, StoredItem
from querator.queue.service import AsyncQuerator
from querator.workflows.engine.continuation import Continuation
from querator.workflows.engine.renewal import Renewer
from querator.workflows.engine.replay import (
    Advance,
    Chained,
    History,
    advance_after_step,
    merge_items,
    transact_creating,
)
from querator.workflows.errors import Defer, StepTimeout
from querator.workflows.functions import StepFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    StepPayload,
    StepRecord,
    error_info,
    record_item,
    step_item,
    wake_item,
)

log = logging.getLogger("querator.workflows")


@dataclass(frozen=True)
class StepContext:
    """What the attempt of a step item running now knows (see :data:`CURRENT_STEP`).

    Set by the worker while a step function runs (in the step's thread too), so
    step kinds built on ``@step`` (``querator.spark``) can name per-attempt
    staging locations, watch for the run's cancellation and use the worker's
    resources.
    """

    aq: AsyncQuerator
    run_id: str
    position: int
    step: str
    attempt: int
    """1 for the first attempt (failed attempts before deferrals included)."""
    record_key: str
    compensation: bool
    """True when the item is a compensation (it runs even once the run is cancelled)."""
    resources: dict[str, Any] = field(default_factory=dict)
    """The worker's resources by name (shared by its steps; closed when it stops)."""
    token: Any = None
    """The event loop's ``EventLoopToken``, for ``anyio.from_thread`` calls from other threads."""


CURRENT_STEP: ContextVar[StepContext | None] = ContextVar("querator_step", default=None)
"""The running step attempt's :class:`StepContext` (None outside a step item)."""


async def _call(step: StepFunction[..., Any], args_text: str) -> str:
    """One attempt; :class:`StepTimeout` when it outlives ``step.timeout``."""
    args, kwargs = step.codec.decode_args(args_text)
    timeout = step.timeout
    if step.is_async:
        try:
            with anyio.fail_after(timeout):
                value = await step.fn(*args, **kwargs)
        except TimeoutError as exc:
            raise StepTimeout(f"step {step.name!r} was cancelled after {timeout}s") from exc
    else:
        began = time.monotonic()
        value = await anyio.to_thread.run_sync(functools.partial(step.fn, *args, **kwargs))
        took = time.monotonic() - began
        if timeout is not None and took > timeout:
            raise StepTimeout(f"step {step.name!r} took {took:.3f}s, over its {timeout}s timeout")
    return step.codec.encode_result(value)


async def _run_kept(
    aq: AsyncQuerator,
    renewer: Renewer,
    leased: Leased,
    step: StepFunction[..., Any],
    args_text: str,
    context: StepContext | None = None,
) -> tuple[Leased, str | BaseException]:
    """One attempt under a lease kept alive by ``renewer``: the lease's latest
    version, and the encoded result or the error."""
    info = await aq.queue_info(leased.queue)
    queue_timeout = info.settings.lease_timeout
    extend = step.lease_timeout or queue_timeout
    if step.lease_timeout is not None:
        [leased] = await aq.renew(leased.queue, [leased], extend=extend)
    kept = renewer.keep(leased, extend, min(extend, queue_timeout) / 3)
    outcome: str | BaseException
    reset = CURRENT_STEP.set(context)
    try:
        outcome = await _call(step, args_text)
    except Exception as exc:
        outcome = exc
    finally:
        CURRENT_STEP.reset(reset)
        current = await renewer.release(kept)
    return current, outcome


async def _defer(aq: AsyncQuerator, current: Leased, payload: StepPayload, defer: Defer) -> None:
    """Complete the item and produce a fresh one due later, in one transaction.

    The fresh item's attempts start at zero; the failed attempts made so far
    (all but the deferring one) travel in ``prior_attempts``.
    """
    later = payload.model_copy(
        update={
            "deferrals": payload.deferrals + 1,
            "prior_attempts": payload.prior_attempts + current.attempts - 1,
        }
    )
    at = datetime.now(UTC) + timedelta(seconds=defer.seconds)
    log.info(
        "run %s step %s@%d deferred by %.3fs",
        payload.run_id,
        payload.step,
        payload.position,
        defer.seconds,
    )
    try:
        await transact_creating(aq, [current], {current.queue: [step_item(later, at)]})
    except Conflict as exc:
        log.warning(
            "run %s step %s: deferral lost its lease: %s", payload.run_id, payload.step, exc
        )


async def _failed(
    aq: AsyncQuerator,
    current: Leased,
    payload: StepPayload,
    step: StepFunction[..., Any],
    error: BaseException,
) -> StepRecord | None:
    """Retry the item (None) or give up: the failure record to store."""
    attempt = payload.prior_attempts + current.attempts
    decision = step.retry.decide(error, attempt)
    log.info(
        "run %s step %s@%d attempt %d failed (%r); %s",
        payload.run_id,
        step.name,
        payload.position,
        attempt,
        error,
        f"retry in {decision.delay:.3f}s" if decision.retry else "giving up",
    )
    if not decision.retry:
        return StepRecord(step=step.name, ok=False, error=error_info(error), attempts=attempt)
    retry_at = datetime.now(UTC) + timedelta(seconds=decision.delay)
    try:
        await aq.retry(current.queue, [current], retry_at=retry_at)
    except Conflict as exc:
        log.warning("run %s step %s: retry lost its lease: %s", payload.run_id, step.name, exc)
    return None


async def execute_step(
    aq: AsyncQuerator,
    leased: Leased,
    payload: StepPayload,
    step: StepFunction[..., Any],
    renewer: Renewer,
    resources: dict[str, Any] | None = None,
    cont: Continuation | None = None,
    history: History | None = None,
    found: Mapping[str, StoredItem] | None = None,
    token: Any = None,
) -> Chained | None:
    """Run the step of ``leased`` (unless it already ran or the run was cancelled)
    and record the outcome.

    With ``cont`` the run is advanced in the same commit (eager continuation;
    ``history`` is what the caller already knows of the run, if anything); the
    result is the next step when it was produced leased to this worker.
    ``found``: the look-up of ``payload.start_keys()`` made when the item was
    produced leased to this worker (None: look them up now). ``token``: the
    event loop's ``EventLoopToken`` (None: taken here).
    """
    run_id, position = payload.run_id, payload.position
    key, *stops = payload.start_keys()
    wake = {payload.workflow_queue: [wake_item(run_id, payload.wake_tag())]}
    if found is None:
        found = await aq.lookup(RESULTS_QUEUE, [key, *stops])
    if any(stop in found for stop in stops):
        log.info("run %s was cancelled; step %s@%d skipped", run_id, step.name, position)
        await transact_creating(aq, [leased], wake)
        return None
    if key in found:
        log.info("run %s step %s@%d already ran; waking the run", run_id, step.name, position)
        await transact_creating(aq, [leased], wake)
        return None
    context = StepContext(
        aq=aq,
        run_id=run_id,
        position=position,
        step=step.name,
        attempt=payload.prior_attempts + leased.attempts,
        record_key=key,
        compensation=payload.slot is not None,
        resources=resources if resources is not None else {},
        token=token if token is not None else current_token(),
    )
    current, outcome = await _run_kept(aq, renewer, leased, step, payload.args, context)
    if isinstance(outcome, Defer):
        await _defer(aq, current, payload, outcome)
        return None
    if isinstance(outcome, BaseException):
        record = await _failed(aq, current, payload, step, outcome)
        if record is None:
            return None
    else:
        attempts = payload.prior_attempts + current.attempts
        record = StepRecord(step=step.name, ok=True, result=outcome, attempts=attempts)
        log.info("run %s step %s@%d completed", run_id, step.name, position)
    stored = {RESULTS_QUEUE: [record_item(key, record, run_id)]}
    advance = await _advance(aq, cont, payload, record, history)
    if advance is None:
        advance = Advance({**stored, **wake})
    else:
        advance = replace(advance, produce=merge_items(stored, advance.produce))
    try:
        return await advance.commit(aq, current, cont)
    except Conflict as exc:
        log.warning(
            "run %s step %s@%d: result dropped, lease lost: %s", run_id, step.name, position, exc
        )
        return None


async def _advance(
    aq: AsyncQuerator,
    cont: Continuation | None,
    payload: StepPayload,
    record: StepRecord,
    history: History | None,
) -> Advance | None:
    """The eager continuation of a step call (None: wake the run instead)."""
    if cont is None or payload.slot is not None:
        return None  # compensations belong to sagas, which advance by wakes
    try:
        return await advance_after_step(aq, cont, payload, record, history)
    except Exception:
        log.exception("run %s: eager continuation failed; waking the run", payload.run_id)
        return None
