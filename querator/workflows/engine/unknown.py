"""Items that name a workflow or step this worker does not know.

During a rollout, workers of one queue may run different versions of the code,
so a name unknown here may be known elsewhere: the item is left for another
worker (retried with a growing delay). After :data:`UNKNOWN_NAME_LEASES`
leases by workers that did not know the name, querator stops waiting and
writes a clear error into the run's history — the step fails with
``UnknownStep`` (the workflow sees :class:`StepFailed`; a saga compensates),
or the run fails with ``UnknownWorkflow`` — and completes the item.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta

from querator.errors import Conflict
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.telemetry import workflow_metrics
from querator.workflows.engine.commit import final_items, transact_creating
from querator.workflows.errors import WorkflowError
from querator.workflows.layout import (
    RESULTS_QUEUE,
    ErrorInfo,
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
    record_item,
    wake_item,
)

log = logging.getLogger("querator.worker")

UNKNOWN_NAME_LEASES = 5
"""Leases of an item with an unknown name before its run records the error."""
UNKNOWN_NAME_DELAY = 0.5
"""Seconds before the first re-offer; doubled on each, at most 60."""


class UnknownName(WorkflowError):
    """The item names a workflow or step this worker does not serve.

    ``give_up`` holds what to write when no worker turned out to know it;
    ``ends`` names the workflow whose run that write ends (None: a step's).
    """

    def __init__(
        self, message: str, give_up: dict[str, list[Item]], ends: str | None = None
    ) -> None:
        super().__init__(message)
        self.give_up = give_up
        self.ends = ends


def unknown_step(payload: StepPayload, headers: Mapping[str, str]) -> UnknownName:
    """The error for a step item (with ``headers``) naming a step this worker does not know."""
    message = f"no worker serves step {payload.step!r} (run {payload.run_id})"
    record = StepRecord(
        step=payload.step, ok=False, error=ErrorInfo(type="UnknownStep", message=message)
    )
    give_up = {
        RESULTS_QUEUE: [record_item(payload.record_key(), record, payload.run_id)],
        payload.workflow_queue: [wake_item(payload.run_id, payload.wake_tag(), trace=headers)],
    }
    return UnknownName(message, give_up)


def unknown_workflow(run_id: str, meta: RunMeta) -> UnknownName:
    """The error for a wake task of a run whose workflow this worker does not know."""
    message = f"no worker serves workflow {meta.workflow!r} (run {run_id})"
    final = RunRecord(ok=False, error=ErrorInfo(type="UnknownWorkflow", message=message))
    return UnknownName(message, final_items(run_id, meta, final), ends=meta.workflow)


async def leave_for_others(aq: AsyncQueueClient, leased: Leased, error: UnknownName) -> None:
    """Re-offer the item to other workers, or record the error once all passed."""
    try:
        if leased.attempts < UNKNOWN_NAME_LEASES:
            delay = min(60.0, UNKNOWN_NAME_DELAY * 2 ** (leased.attempts - 1))
            retry_at = aq.clock.now() + timedelta(seconds=delay)
            await aq.retry(leased.queue, [leased], retry_at=retry_at)
            log.warning("%s; left for another worker (lease %d)", error, leased.attempts)
        else:
            await transact_creating(aq, [leased], error.give_up)
            if error.ends is not None:
                workflow_metrics.run_ended(error.ends, "failed")
            log.error(
                "%s after %d leases; the error is in the run's history", error, leased.attempts
            )
    except Conflict as exc:
        log.warning("item %s: lease lost before it was handed on: %s", leased.id, exc)
