"""Carrying out the engine's moves: the one place a run's progress is committed.

The engine (:mod:`.driver`) gathers the facts, asks :mod:`.decisions` for the
next move and hands it here with the item in hand (:class:`Hand`). Every move
completes that item, with the records it carries (a step's record), in the
transaction that produces what the move asks for, so a step's outcome commits
atomically with whatever comes next, and a run that waits always has an item
(a step item, a wake task, a timer) that will wake it. A :class:`Park` keeps
the body parked on what its commit made durable; a failed commit tears it down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from querator.errors import Conflict
from querator.queue.models import Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.telemetry import workflow_metrics
from querator.workflows.engine.commit import (
    Produce,
    child_started,
    commit_final,
    commit_held,
    commit_wake,
    merge_items,
    not_colliding,
    split_claim,
    transact_creating,
)
from querator.workflows.engine.context import (
    Request,
    StepCall,
    request_items,
    started_children,
    waited_positions,
)
from querator.workflows.engine.decisions import Commit, Compensate, End, Hold, Park, WakeRun
from querator.workflows.engine.history import load_history
from querator.workflows.engine.live import LiveRun, LiveRuns
from querator.workflows.engine.parent_close import cancel_if_closing
from querator.workflows.engine.replay import evaluate
from querator.workflows.engine.served import Served
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.sagas.advance import saga_advance
from querator.workflows.stored import RunRecord, StepPayload, StepRecord, record_item

__all__ = ["Claimed", "Committer", "Hand", "record_items"]

log = logging.getLogger("querator.workflows")


@dataclass(frozen=True)
class Hand:
    """The item a commit completes, and the records its completion stores (a
    step's record, committed with whatever comes next)."""

    item: Leased
    produce: Produce = field(default_factory=dict)


Claimed = tuple[Leased, StepPayload, dict[str, StoredItem]]
"""A step item a commit handed this worker: its lease, payload and looked-up records."""


def record_items(payload: StepPayload, record: StepRecord) -> Produce:
    """The items storing a step's record."""
    return {RESULTS_QUEUE: [record_item(payload.record_key(), record, payload.run_id)]}


class Committer:
    """Commits the moves of one worker's engine (see the module doc)."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        live: LiveRuns,
        served: Served,
        client_id: str,
        active: Callable[[], bool],
        moved: Callable[[str], None] = lambda run_id: None,
        ended: Callable[[str, RunRecord], None] = lambda run_id, final: None,
    ) -> None:
        self.aq = aq
        self.moved = moved
        """Told the run's id after each commit (the progress beacon's poke)."""
        self.ended = ended
        """Told the run's id and final record once a commit ended the run."""
        self.live = live
        self.served = served
        self.client_id = client_id
        self.active = active
        """False once the worker is stopping: it then hands itself nothing new."""

    async def commit(self, hand: Hand, move: Commit, live: LiveRun | None = None) -> Claimed | None:
        """Commit ``move`` with the item in hand. ``live``: the run's body (a
        :class:`Park` keeps it; after a :class:`WakeRun` it keeps the step's
        record once committed, or is torn down if it parked on nothing committed).
        Returns the step item a :class:`Park` hands this worker, if any."""
        try:
            return await self._commit(hand, move, live)
        finally:
            if hand.item.reference:
                self.moved(hand.item.reference)

    async def _commit(self, hand: Hand, move: Commit, live: LiveRun | None) -> Claimed | None:
        if isinstance(move, Park):
            assert live is not None
            with child_started(live.meta.trace, move.request) as request:
                return await self._park(live, hand, request)
        if isinstance(move, Hold):
            await commit_held(self.aq, hand.item, merge_items(hand.produce, move.produce))
        elif isinstance(move, WakeRun):
            committed = await commit_wake(self.aq, hand.item, move.payload, hand.produce)
            if live is not None:
                await _settle(live, move, committed)
        elif isinstance(move, End):
            if await commit_final(
                self.aq, hand.item, hand.produce, move.run_id, move.meta, move.final
            ):
                self.ended(move.run_id, move.final)
        else:
            await self._saga(hand, move)
        return None

    async def _park(self, live: LiveRun, hand: Hand, request: Request) -> Claimed | None:
        """Commit ``request``'s items with the item in hand; keep the body parked on it."""
        run_id, held = live.run_id, hand.item
        items = request_items(run_id, live.ctx, request, live.meta.trace)
        payloads = {}
        if isinstance(request, StepCall):
            payloads = {items[request.queue][0].dedup_key or "": request.payload}
        rest, claim = (items, None)
        if self.active():
            rest, claim = split_claim(items, payloads, self.served.can_run)
        everything = not_colliding(held, merge_items(hand.produce, rest))
        try:
            if claim is None:
                await transact_creating(self.aq, [held], everything)
                result = None
            else:
                result = await transact_creating(
                    self.aq,
                    [held],
                    everything,
                    {claim.queue: [claim.item]},
                    self.client_id,
                    lookup={RESULTS_QUEUE: claim.payload.start_keys()},
                )
        except Conflict as exc:
            log.warning("run %s: %s lost its lease: result dropped (%s)", run_id, held.kind, exc)
            await self.live.drop(live)
            return None
        except BaseException:
            await self.live.drop(live)
            raise
        live.request = request
        self.live.keep(live)
        children = started_children(request)
        for child in children:
            workflow_metrics.run_started(child.meta.workflow)
        if children:  # the run's end, on another worker, may not have seen them
            await cancel_if_closing(self.aq, run_id, live.meta, children)
        if claim is None or result is None:
            return None
        [mine] = result.leased.get(claim.queue, [None])
        if mine is None:
            return None  # produced, but not leasable now: the queue hands it out
        return mine, claim.payload, result.found.get(RESULTS_QUEUE, {})

    async def _saga(self, hand: Hand, move: Compensate) -> None:
        """Advance a saga that failed, is cancelled, timed out or compensating."""
        history = move.history
        if history is None:
            history = await load_history(self.aq, move.run_id, move.position)
        meta, stored = history.meta, history
        assert meta is not None

        async def body() -> Any:
            return await evaluate(self.aq, move.run_id, move.wf, stored)

        final, produce = await saga_advance(self.aq, move.run_id, meta, body)
        produce = merge_items(hand.produce, produce)
        if final is None:
            await commit_held(self.aq, hand.item, produce)
        else:
            await commit_final(self.aq, hand.item, produce, move.run_id, meta, final)


async def _settle(live: LiveRun, move: WakeRun, committed: bool) -> None:
    """After a step's wake: a parked body keeps the step's record (a gather's
    other members need it); a replayed one, parked on nothing committed, goes."""
    position, record = move.payload.position, move.record
    if live.request is None:
        await live.close()
    elif committed and record is not None and position in waited_positions(live.request):
        live.ctx.add(position, record)
