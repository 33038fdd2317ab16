"""Reading and advancing a saga's compensation phase (the I/O around :mod:`saga`).

Records (results queue), besides a workflow's:

- ``{run}/compensating``: the reason and the fixed plan (written once);
- ``{run}/c{k}`` (``{run}/c{k}/r{round}`` after re-drives): how compensation
  ``k`` ended, written by its item like a step record;
- ``{run}/cfailed/{g}``: compensation failed for good (the run is
  ``compensation_failed``); ``{run}/redrive/{g}`` answers it
  (``retry_compensation``) and the failed compensation runs again.
"""

from __future__ import annotations

import logging

from querator.errors import QueueNotFound
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import (
    RESULTS_QUEUE,
    cfailed_key,
    compensating_key,
    compensation_slot,
    meta_key,
    redrive_key,
    result_key,
)
from querator.workflows.sagas.core import (
    Dispatch,
    Done,
    SagaState,
    Stuck,
    next_move,
    pending_status,
)
from querator.workflows.stored import (
    CompensatingRecord,
    CompensationFailedRecord,
    RedriveRecord,
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
    record_item,
    step_item,
    wake_item,
)

__all__ = [
    "compensation_items",
    "load_saga_state",
    "redrive",
    "saga_statuses",
]

log = logging.getLogger("querator.workflows")

WINDOW = 32
"""``cfailed``/``redrive`` records looked up at once."""


async def _numbered(aq: AsyncQueueClient, run_id: str) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """``{run}/cfailed/{g}`` and ``{run}/redrive/{g}`` payloads, by ``g``."""
    failed: dict[int, bytes] = {}
    redrives: dict[int, bytes] = {}
    start = 0
    while True:
        f_keys = {cfailed_key(run_id, g): g for g in range(start, start + WINDOW)}
        r_keys = {redrive_key(run_id, g): g for g in range(start, start + WINDOW)}
        found = await aq.lookup(RESULTS_QUEUE, [*f_keys, *r_keys])
        failed.update({f_keys[k]: v.payload for k, v in found.items() if k in f_keys})
        redrives.update({r_keys[k]: v.payload for k, v in found.items() if k in r_keys})
        if len(found) < 2 * WINDOW:
            return failed, redrives
        start += WINDOW


async def load_saga_state(
    aq: AsyncQueueClient, run_id: str, compensating: CompensatingRecord | None = None
) -> SagaState | None:
    """The compensation phase's records; None when the saga is not compensating."""
    if compensating is None:
        found = await aq.lookup(RESULTS_QUEUE, [compensating_key(run_id)])
        item = found.get(compensating_key(run_id))
        if item is None:
            return None
        compensating = CompensatingRecord.model_validate_json(item.payload)
    failed_raw, redrive_raw = await _numbered(aq, run_id)
    state = SagaState(
        compensating,
        failed={g: CompensationFailedRecord.model_validate_json(v) for g, v in failed_raw.items()},
        redrives={g: RedriveRecord.model_validate_json(v) for g, v in redrive_raw.items()},
    )
    rounds = state.rounds()
    keys = {
        f"{run_id}/{compensation_slot(k, rounds.get(k, 0))}": k
        for k in range(len(compensating.plan))
    }
    if keys:
        found = await aq.lookup(RESULTS_QUEUE, list(keys))
        for key, item in found.items():
            state.records[keys[key]] = StepRecord.model_validate_json(item.payload)
    return state


def compensation_items(
    run_id: str, meta: RunMeta, state: SagaState
) -> tuple[dict[str, list[Item]], RunRecord | None]:
    """What to produce for the next move of the compensation phase, and the
    run's final record when it ends now (the caller adds the final items)."""
    move = next_move(state)
    comp = state.compensating
    if isinstance(move, Dispatch):
        entry = comp.plan[move.index]
        payload = StepPayload(
            run_id=run_id,
            position=entry.position,
            step=entry.name,
            args=entry.args,
            workflow_queue=meta.queue,
            workflow=meta.workflow,
            slot=compensation_slot(move.index, move.round),
        )
        log.info(
            "saga %s compensating: %s for step %s@%d",
            run_id,
            entry.name,
            entry.step,
            entry.position,
        )
        return {entry.queue: [step_item(payload, trace=meta.trace)]}, None
    if isinstance(move, Stuck):
        entry = comp.plan[move.index]
        record = CompensationFailedRecord(index=move.index, name=entry.name, error=move.error)
        log.error(
            "saga %s compensation_failed: %s for step %s@%d failed for good (%s)",
            run_id,
            entry.name,
            entry.step,
            entry.position,
            move.error,
        )
        return {RESULTS_QUEUE: [record_item(cfailed_key(run_id, move.g), record, run_id)]}, None
    assert isinstance(move, Done)
    final = RunRecord(
        ok=False,
        error=comp.error,
        cancelled=comp.cancelled,
        status=None if comp.cancelled else "compensated",
        compensations=move.ran,
        saga=True,
    )
    return {}, final


async def redrive(aq: AsyncQueueClient, run_id: str) -> bool:
    """Run the failed compensation of a ``compensation_failed`` saga again.

    False (and nothing written) when the run is not ``compensation_failed``.
    """
    try:
        found = await aq.lookup(RESULTS_QUEUE, [meta_key(run_id), result_key(run_id)])
    except QueueNotFound:
        return False
    if meta_key(run_id) not in found or result_key(run_id) in found:
        return False
    state = await load_saga_state(aq, run_id)
    if state is None or pending_status(state) != "compensation_failed":
        return False
    g = len(state.redrives)
    meta = RunMeta.model_validate_json(found[meta_key(run_id)].payload)
    record = RedriveRecord(index=state.failed[g].index, requested_at=aq.clock.now())
    await aq.transact(
        produce={
            RESULTS_QUEUE: [record_item(redrive_key(run_id, g), record, run_id)],
            meta.queue: [
                wake_item(run_id, f"redrive{g}", trace=meta.trace, workflow=meta.workflow)
            ],
        }
    )
    log.info("saga %s: compensation %s re-driven", run_id, state.failed[g].name)
    return True


async def saga_statuses(aq: AsyncQueueClient, run_ids: list[str]) -> dict[str, str]:
    """``compensating`` or ``compensation_failed`` for the given runs without a
    result record that are compensating (others are left out)."""
    if not run_ids:
        return {}
    found = await aq.lookup(RESULTS_QUEUE, [compensating_key(r) for r in run_ids])
    statuses: dict[str, str] = {}
    for run_id in run_ids:
        item = found.get(compensating_key(run_id))
        if item is None:
            continue
        record = CompensatingRecord.model_validate_json(item.payload)
        statuses[run_id] = pending_status(await load_saga_state(aq, run_id, record))
    return statuses
