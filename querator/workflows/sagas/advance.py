"""One replay of a saga: run its body, or enter and drive its compensation phase.

- No ``{run}/compensating`` record yet: the body is replayed like any
  workflow's. It returns: the run completes. It raises (``NonDeterminism``
  aside): the plan is fixed and stored in ``{run}/compensating`` together with
  the first compensation's item, in the transaction that completes the wake.
- Cancelled or past its deadline: the body is replayed without dispatching, to
  learn which steps completed; while a step it waits on still has an item
  (running, or waiting for a retry) the run waits for it (``{run}/aborted``
  makes new attempts skip), then compensates as above.
- ``{run}/compensating`` exists: the body is not run; the compensation records
  say what comes next (:func:`querator.workflows.sagas.core.next_move`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Protocol

from querator.errors import QueueNotFound
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.context import Called
from querator.workflows.keys import RESULTS_QUEUE, aborted_key, compensating_key, step_key
from querator.workflows.sagas.compensation import compensation_items, load_saga_state
from querator.workflows.sagas.core import SagaState, compensation_plan
from querator.workflows.stored import (
    CompensatingRecord,
    ErrorInfo,
    RunMeta,
    RunRecord,
    StepRecord,
    record_item,
)

__all__ = ["BodyOutcome", "saga_advance"]

Produce = dict[str, list[Item]]


class BodyOutcome(Protocol):
    """One replay of a saga's body (:class:`querator.workflows.engine.replay.Evaluation`):
    its final record (None: it waits), what it saw and what it waits for, and for
    an aborted saga why."""

    @property
    def final(self) -> RunRecord | None: ...
    @property
    def records(self) -> Mapping[int, StepRecord]: ...
    @property
    def compensable(self) -> Mapping[int, Called]: ...
    @property
    def created(self) -> Mapping[int, datetime]: ...
    @property
    def fatal(self) -> Exception | None: ...
    @property
    def abort(self) -> RunRecord | None: ...
    @property
    def awaited(self) -> list[tuple[str, int]]: ...
    @property
    def produce(self) -> Produce: ...


async def _in_flight(aq: AsyncQueueClient, run_id: str, outcome: BodyOutcome) -> bool:
    """Whether a step the aborted body waits on still has its item (will end and wake),
    or ended since the history was loaded (its wake will replay the run)."""
    for queue, position in outcome.awaited:
        try:
            found = await aq.lookup(queue, [f"{run_id}/{position}/step"])
        except QueueNotFound:
            continue
        if found:
            return True
    keys = [step_key(run_id, position) for _, position in outcome.awaited]
    return bool(keys) and bool(await aq.lookup(RESULTS_QUEUE, keys))


def _enter(
    run_id: str,
    meta: RunMeta,
    outcome: BodyOutcome,
    error: ErrorInfo,
    cancelled: bool,
) -> tuple[RunRecord | None, Produce]:
    plan = compensation_plan(outcome.compensable, outcome.records, outcome.created, meta.queue)
    record = CompensatingRecord(error=error, cancelled=cancelled, plan=plan)
    produce, final = compensation_items(run_id, meta, SagaState(record))
    item = record_item(compensating_key(run_id), record, run_id)
    produce.setdefault(RESULTS_QUEUE, []).insert(0, item)
    return final, produce


async def saga_advance(
    aq: AsyncQueueClient,
    run_id: str,
    meta: RunMeta,
    body: Callable[[], Awaitable[BodyOutcome]],
) -> tuple[RunRecord | None, Produce]:
    """The saga's final record (None: not ended) and what to produce with the wake."""
    state = await load_saga_state(aq, run_id)
    if state is not None:
        produce, final = compensation_items(run_id, meta, state)
        return final, produce
    outcome = await body()
    final = outcome.final
    if outcome.fatal is not None or (outcome.abort is None and (final is None or final.ok)):
        return (final.model_copy(update={"saga": True}) if final else None), outcome.produce
    if outcome.abort is None:
        assert final is not None and final.error is not None
        return _enter(run_id, meta, outcome, final.error, cancelled=False)
    abort = outcome.abort
    assert abort.error is not None
    if await _in_flight(aq, run_id, outcome):
        marker = record_item(aborted_key(run_id), abort.error, run_id)
        return None, {RESULTS_QUEUE: [marker]}
    return _enter(run_id, meta, outcome, abort.error, cancelled=abort.cancelled)
