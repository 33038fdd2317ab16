"""Running one attempt of a step item: its function under a kept lease, and what
its outcome means (a record to store, a retry, a deferral)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypedDict

import anyio

from querator.errors import Conflict, InvalidArgument
from querator.limits.admission import Limits
from querator.queue.harness import Renewer
from querator.queue.models import Item, Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.telemetry.logs import log_fields
from querator.telemetry.runs import Attempt, joined, step_attempt
from querator.workflows.engine import limited
from querator.workflows.engine.commit import transact_creating
from querator.workflows.errors import Defer, ResultNotEncodable, StepTimeout
from querator.workflows.functions import StepFunction
from querator.workflows.keys import RESULTS_QUEUE, attempt_key
from querator.workflows.retry import RetryDecision
from querator.workflows.step_context import CURRENT_STEP, StepContext
from querator.workflows.stored import (
    AttemptRecord,
    StepPayload,
    StepRecord,
    error_info,
    record_item,
    step_item,
)

log = logging.getLogger("querator.workflows")


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
    try:
        return step.codec.encode_result(value)
    except InvalidArgument as exc:
        raise ResultNotEncodable(f"step {step.name!r} returned {value!r}: {exc}") from exc


async def _run_kept(
    aq: AsyncQueueClient,
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


async def _defer(aq: AsyncQueueClient, current: Leased, payload: StepPayload, defer: Defer) -> None:
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
    at = aq.clock.now() + timedelta(seconds=defer.seconds)
    log.info(
        "run %s step %s@%d deferred by %.3fs",
        payload.run_id,
        payload.step,
        payload.position,
        defer.seconds,
    )
    try:
        item = step_item(later, at, trace=current.headers)
        await transact_creating(aq, [current], {current.queue: [item]})
    except Conflict as exc:
        log.warning(
            "run %s step %s: deferral lost its lease: %s", payload.run_id, payload.step, exc
        )


class Attempted(TypedDict):
    """When an attempt began and the worker that ran it (for its records)."""

    started_at: datetime
    worker: str


async def _failed(
    aq: AsyncQueueClient,
    current: Leased,
    payload: StepPayload,
    step: StepFunction[..., Any],
    error: BaseException,
    attempt_of: Attempted,
) -> StepRecord | None:
    """Retry the item (None) or give up: the failure record to store. A retried
    attempt leaves its record (:class:`AttemptRecord`), committed with the retry."""
    attempt = payload.prior_attempts + current.attempts
    decision = RetryDecision(retry=False)
    if not isinstance(error, ResultNotEncodable):  # the same result would fail again
        decision = step.retry.decide(error, attempt)
    log.log(
        logging.WARNING if decision.retry else logging.ERROR,
        "run %s step %s@%d attempt %d failed (%r); %s",
        payload.run_id,
        step.name,
        payload.position,
        attempt,
        error,
        f"retry in {decision.delay:.3f}s" if decision.retry else "giving up",
        exc_info=error,
    )
    if not decision.retry:
        info = error_info(error, with_traceback=True)
        return StepRecord(step=step.name, ok=False, error=info, attempts=attempt, **attempt_of)
    retry_at = aq.clock.now() + timedelta(seconds=decision.delay)
    tried = AttemptRecord(attempt=attempt, error=error_info(error), **attempt_of)
    key = attempt_key(payload.record_key(), attempt)
    try:
        await aq.commit(
            retry=[current],
            retry_at=retry_at,
            produce={RESULTS_QUEUE: [record_item(key, tried, payload.run_id)]},
            silent=[RESULTS_QUEUE],
        )
    except Conflict as exc:
        log.warning("run %s step %s: retry lost its lease: %s", payload.run_id, step.name, exc)
    return None


class StepRunner:
    """Runs attempts of step items for one worker (its renewer, resources and loop)."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        renewer: Renewer,
        resources: dict[str, Any],
        token: Callable[[], Any],
        client_id: str = "querator-worker",
    ) -> None:
        self.aq = aq
        self.client_id = client_id
        self.limits = Limits(aq, renewer, client_id)
        """The steps' concurrency and rate limits."""
        self.renewer = renewer
        self.resources = resources
        self._token = token
        self._deferred: dict[str, dict[str, list[Item]]] = {}
        """Tasks deferred by completed attempts, by record key (see :meth:`produce_for`)."""

    def produce_for(self, payload: StepPayload, record: StepRecord) -> dict[str, list[Item]]:
        """What commits with ``record``: the record, and the tasks its attempt deferred."""
        produce = {RESULTS_QUEUE: [record_item(payload.record_key(), record, payload.run_id)]}
        for queue, items in self._deferred.pop(payload.record_key(), {}).items():
            produce.setdefault(queue, []).extend(items)
        return produce

    @staticmethod
    def skipped(payload: StepPayload, found: Mapping[str, StoredItem]) -> bool:
        """Whether the run was cancelled (or its saga aborted or compensating), so
        the step must not start (``found``: the look-up of ``payload.start_keys()``)."""
        _, *stops = payload.start_keys()
        if any(stop in found for stop in stops):
            log.info(
                "run %s was cancelled; step %s@%d skipped",
                payload.run_id,
                payload.step,
                payload.position,
            )
            return True
        return False

    async def run(
        self, leased: Leased, payload: StepPayload, step: StepFunction[..., Any]
    ) -> tuple[Leased, StepRecord] | None:
        """One attempt of ``step`` for ``leased``: the item's latest version and the
        record to store (a success, or a failure for good), or None when the
        attempt was retried or deferred (or its lease lost meanwhile)."""
        run_id, position = payload.run_id, payload.position
        attempt = payload.prior_attempts + leased.attempts
        compensation = payload.slot is not None
        with (
            joined(leased.headers),
            step_attempt(run_id, step.name, position, attempt, leased.queue, compensation) as span,
            log_fields(step=step.name, position=position, attempt=attempt),
        ):
            log.info("run %s step %s@%d: attempt %d", run_id, step.name, position, attempt)
            context = StepContext(
                aq=self.aq,
                run_id=run_id,
                position=position,
                step=step.name,
                attempt=attempt,
                record_key=payload.record_key(),
                compensation=compensation,
                resources=self.resources,
                token=self._token(),
            )
            entry = await limited.enter(self.limits, leased, payload, step)
            if entry is None:
                span.ended("deferred")  # parked for a permit
                return None
            if entry.defer is not None:
                span.ended("deferred")
                await _defer(self.aq, leased, payload, Defer(entry.defer))
                return None
            began = Attempted(started_at=self.aq.clock.now(), worker=self.client_id)
            try:
                current, outcome = await _run_kept(
                    self.aq, self.renewer, leased, step, payload.args, context
                )
            finally:
                await self.limits.leave(entry)
            if context.deferred and not isinstance(outcome, BaseException):
                self._deferred[payload.record_key()] = context.deferred
            return await self._outcome(current, payload, step, outcome, span, began)

    async def _outcome(
        self,
        current: Leased,
        payload: StepPayload,
        step: StepFunction[..., Any],
        outcome: str | BaseException,
        span: Attempt,
        began: Attempted,
    ) -> tuple[Leased, StepRecord] | None:
        """What the attempt's ``outcome`` means (see :meth:`run`), noted on ``span``."""
        if isinstance(outcome, Defer):
            span.ended("deferred")
            await _defer(self.aq, current, payload, outcome)
            return None
        if isinstance(outcome, BaseException):
            record = await _failed(self.aq, current, payload, step, outcome, began)
            span.ended("retried" if record is None else "failed", outcome)
            if record is None:
                return None
            return current, record
        span.ended("completed")
        attempts = payload.prior_attempts + current.attempts
        log.info("run %s step %s@%d completed", payload.run_id, step.name, payload.position)
        record = StepRecord(step=step.name, ok=True, result=outcome, attempts=attempts, **began)
        return current, record
