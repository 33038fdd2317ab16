"""Advancing runs on one worker: live bodies resumed, replayed only on a miss.

The worker hands every wake task and step item to the :class:`Engine`:

- A **step item** runs its step (:mod:`.execute`); with the outcome in hand
  the engine resumes the run's body, if this worker runs the workflow, and
  commits, in the transaction that completes the item and stores the step's
  record, whatever the body asks next: the next step item (produced leased to
  this worker when it runs that step too, which it then runs at once), a
  gather's items, a timer, a child run, or the run's result.
- A **wake task** (a step that ended elsewhere, a timer, a child's end, a
  cancel request, a deadline) looks up what the parked body waits for and
  resumes it when it is there.
- Resuming needs the body: live in this worker (a *hit*, nothing replayed)
  or, on a *miss*, replayed from the stored history (one lookup) into a new
  live body. A body is kept (:class:`LiveRuns`) only parked on a request its
  commit made durable; a failed commit tears it down.

A body may be resumed with a step's record before that record commits: the
commit then carries the record, and if it fails (the lease was lost) the body
is torn down and the run replays from what is stored. A step can only commit
its record while holding its item, and two items of one step never coexist
(dedup keys), so a record a live body saw is the record stored.

Each decision is pure (:mod:`.decisions`): the engine gathers the facts (a
lookup, a replay), takes the next move as a value and hands every commit to
one place (:class:`~.committer.Committer`), which completes the item in hand
with the records it carries in the transaction producing what comes next.

When the body's next move cannot be decided here (a gather member ends while
others run elsewhere; a step of a workflow this worker does not run), the
commit produces a wake task instead, and whoever leases it decides from what
is committed then. Sagas run their bodies live too; a saga that fails, is
cancelled or passes its deadline is advanced by replay (:mod:`..sagas.advance`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import anyio

from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.telemetry.logs import log_fields
from querator.telemetry.runs import joined, slept
from querator.workflows.engine.commit import Produce, parent_items
from querator.workflows.engine.committer import Claimed, Committer, Hand
from querator.workflows.engine.context import (
    Gather,
    Recv,
    Request,
    Sleep,
    StepCall,
    WaitEvent,
    starts_runs,
    waited_positions,
)
from querator.workflows.engine.decisions import (
    Hold,
    Park,
    Resume,
    Stored,
    WakeRun,
    after_record,
    from_history,
    next_move,
    resumes_on,
    tag_position,
    timed_out,
    timer_ended,
    woken,
)
from querator.workflows.engine.execute import StepRunner
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import History, load_history, started
from querator.workflows.engine.live import LiveRun, LiveRuns
from querator.workflows.engine.poison import Poison
from querator.workflows.engine.read_ahead import ReadAheads, State
from querator.workflows.engine.reading import (
    Ahead,
    after_read,
    look_ahead,
    parked_on,
    read_now,
    store_read,
    with_published,
)
from querator.workflows.engine.replay import new_live, resume
from querator.workflows.engine.rerouting import NotServed
from querator.workflows.engine.resumption import apply_resume
from querator.workflows.engine.served import Served
from querator.workflows.keys import (
    RESULTS_QUEUE,
    RESUME_TAG,
    aborted_key,
    cancel_key,
    compensating_key,
    meta_key,
    result_key,
    step_key,
    step_kind,
    wake_kind,
)
from querator.workflows.sagas.core import SagaFunction
from querator.workflows.stored import RunRecord, StepPayload, StepRecord, WakePayload

__all__ = ["Engine", "Poison"]  # Poison: re-exported from .poison

log = logging.getLogger("querator.workflows")

A = TypeVar("A")
B = TypeVar("B")


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two calls at once (two connections: one round trip's wait, not two)."""
    results: list[Any] = [None, None]

    async def run(index: int, call: Awaitable[Any]) -> None:
        results[index] = await call

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run, 0, first)
            group.start_soon(run, 1, second)
    except BaseExceptionGroup as failed:  # the first error as itself, as one call raises it
        raise failed.exceptions[0] from None
    return results[0], results[1]


def _heads(run_id: str) -> list[str]:
    """The records that stop a parked body from resuming (the run ended, was
    cancelled or compensates)."""
    return [result_key(run_id), cancel_key(run_id), compensating_key(run_id)]


def _state_keys(run_id: str, request: Request) -> list[str]:
    """What a wake of a body parked on ``request`` looks up: :func:`_heads` and
    the records of the positions it waits for."""
    return _heads(run_id) + [step_key(run_id, p) for p in waited_positions(request)]


class Engine:
    """Advances the runs of one worker (see the module doc)."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        served: Served,
        runner: StepRunner,
        client_id: str,
        max_live_runs: int,
        active: Callable[[], bool],
        held: dict[str, Leased],
        moved: Callable[[str], None] = lambda run_id: None,
        ended: Callable[[str, RunRecord], None] = lambda run_id, final: None,
    ) -> None:
        self.aq = aq
        self.served = served
        self.runner = runner
        self.client_id = client_id
        self.live = LiveRuns(max_live_runs)
        self.active = active
        """False once the worker is stopping: it then hands itself nothing new."""
        self.committer = Committer(aq, self.live, served, client_id, active, moved, ended)
        """Where every move is committed."""
        self.counts: Counter[str] = Counter()
        self.ahead = ReadAheads(aq, self.live, self._look_ahead)
        """Reads of bodies parked on ``recv`` started by a send's wakeup (see
        :mod:`.read_ahead`; served by the worker)."""
        self._held = held
        """The worker's items in hand (released on shutdown); steps this engine hands
        itself are added while they run."""

    # -- entry points ------------------------------------------------------------

    async def wake(self, wake: Leased, payload: WakePayload) -> None:
        """Advance the run a wake task names."""
        run_id = payload.run_id
        with joined(wake.headers), log_fields(run_id=run_id):
            async with self._locked(run_id, wake) as held:
                live = self.live.get(run_id)
                if live is not None:
                    await self._wake_live(Hand(held[0]), live)
                else:
                    await self._wake_miss(Hand(held[0]), payload)
        await self.live.trim()

    async def step(self, leased: Leased, payload: StepPayload) -> None:
        """Run a step item leased from its queue, then advance its run."""
        with joined(leased.headers), log_fields(run_id=payload.run_id):
            await self._step(leased, payload)
        await self.live.trim()

    async def _step(self, leased: Leased, payload: StepPayload) -> None:
        step = self.served.step(payload.step, leased.queue)
        if step is None:  # an item written before routing: for the workers that serve it
            raise NotServed(f"step {payload.step!r} is not served here", step_kind(payload.step))
        found = await self.aq.lookup(RESULTS_QUEUE, payload.start_keys())
        if self.runner.skipped(payload, found):
            await self.committer.commit(Hand(leased), WakeRun(payload))
            return
        if payload.record_key() in found:
            log.info(
                "run %s step %s@%d already ran; waking the run",
                payload.run_id,
                payload.step,
                payload.position,
            )
            await self.committer.commit(Hand(leased), WakeRun(payload))
            return
        ran = await self.runner.run(leased, payload, step)
        if ran is None:
            return
        current, record = ran
        hand = Hand(current, self.runner.produce_for(payload, record))
        if payload.slot is not None or payload.workflow_queue not in self.served.workflow_queues:
            await self.committer.commit(hand, WakeRun(payload))  # compensations: sagas use wakes
            return
        async with self._locked(payload.run_id, current) as held:
            hand = replace(hand, item=held[0])
            live, move = await self._with_record(self.live.get(payload.run_id), payload, record)
            if isinstance(move, WakeRun):
                await self.committer.commit(hand, move, live)
                return
            assert live is not None  # resumed
            await self._drive(live, hand)

    async def close(self) -> None:
        """Tear every live body down (the worker stops)."""
        await self.live.close_all()

    @asynccontextmanager
    async def _locked(self, run_id: str, leased: Leased) -> AsyncIterator[list[Leased]]:
        """Hold the run's lock, keeping ``leased`` renewed while waiting for it
        (another task may be running a long step of the run); yields the item's
        latest version."""
        if not self.live.busy(run_id):
            async with self.live.hold(run_id):
                yield [leased]
            return
        info = await self.aq.queue_info(leased.queue)
        timeout = info.settings.lease_timeout
        kept = self.runner.renewer.keep(leased, timeout, timeout / 3)
        async with self.live.hold(run_id):
            yield [await self.runner.renewer.release(kept)]

    # -- gathering the facts a decision needs -------------------------------------

    async def _with_record(
        self, live: LiveRun | None, payload: StepPayload, record: StepRecord
    ) -> tuple[LiveRun | None, Resume | WakeRun]:
        """What to do with a step's ``record`` (:func:`after_record`), and the run's
        body: ``live``, else replayed here. Resumed: the body has ``record`` added.
        The caller holds the run's lock."""
        run_id, position = payload.run_id, payload.position
        message: Request | Finished | None = None
        if live is None:
            replayed = await self._replay(run_id, position)
            if replayed is not None:
                live, message = replayed
        request = live.request if message is None and live is not None else message
        stopped = False
        if live is not None and resumes_on(live, request, position):
            stopped = await self._stopped(live, record)
        move = after_record(live, request, payload, record, stopped)
        if live is not None and isinstance(move, Resume):
            live.ctx.add(position, record)
            return live, move
        if stopped and live is not None:
            await self.live.drop(live)
            live = None
        return live, move

    async def _replay(
        self, run_id: str, position: int
    ) -> tuple[LiveRun, Request | Finished] | None:
        """Replay a run that is not live here into a new (uncommitted) live body,
        when this worker can: None for finished, unknown, ending or saga-phase runs."""
        self.counts["looked_up"] += 1
        history = await load_history(self.aq, run_id, position)
        meta = history.meta
        if meta is None or history.finished is not None:
            return None
        wf = self.served.workflows.get(meta.workflow)
        if wf is None:
            return None
        if not isinstance(from_history(run_id, wf, history, self.aq.clock.now()), Resume):
            return None  # it ends, or a saga's replay advances it
        self.counts["replayed"] += 1
        live = new_live(run_id, wf, history, self.aq.clock)
        return live, await resume(self.aq, live)

    async def _stopped(self, live: LiveRun, record: StepRecord) -> bool:
        """Whether the run was cancelled (a saga: or aborted, or is compensating)
        while its step ran: the step's record must not advance the body then (a
        wake decides from what is stored). Asked for every step of a saga, and
        for a failed step of a workflow (a cancellation fails a running step
        that watches for it); a workflow's next step notices it anyway."""
        run_id = live.run_id
        keys = [cancel_key(run_id)]
        if isinstance(live.wf, SagaFunction):
            keys += [aborted_key(run_id), compensating_key(run_id)]
        elif record.ok:
            return False
        return bool(await self.aq.lookup(RESULTS_QUEUE, keys))

    # -- wakes ---------------------------------------------------------------------

    async def _wake_live(self, hand: Hand, live: LiveRun) -> None:
        run_id, request = live.run_id, live.request
        assert request is not None
        waits = waited_positions(request)
        heads = _heads(run_id)
        ahead: Ahead | None = None
        if isinstance(request, Recv | WaitEvent):  # what it reads, beside the run's state
            state = await self.ahead.take(live, request, hand.item)
            if state is not None:
                self.counts["read_ahead"] += 1
            found, ahead = state or await self._look_ahead(live, request)
        else:
            found = await self.aq.lookup(RESULTS_QUEUE, _state_keys(run_id, request))
        for position in waits:
            item = found.get(step_key(run_id, position))
            if item is not None and position not in live.ctx.records:
                record = StepRecord.model_validate_json(item.payload)
                live.ctx.add(position, record, item.created_at)
        ended = any(key in found for key in heads)
        move = woken(live, request, ended, self.aq.clock.now())
        if isinstance(move, Stored):
            await self.live.drop(live)  # ended, cancelled or compensating: from what is stored
            await self._wake_miss(hand, WakePayload(run_id=run_id))
        elif isinstance(move, Resume):
            self.counts["resumed"] += 1
            if isinstance(request, Sleep):
                since = request.since or request.until
                slept(run_id, request.position, since, request.until, live.meta.trace)
            await self._drive(live, hand, ahead=ahead)
        else:
            await self.committer.commit(hand, move)

    async def _look_ahead(self, live: LiveRun, request: Recv | WaitEvent) -> State:
        """The run's state (:func:`_state_keys`) and what the body parked on
        ``request`` would read, looked up at once."""
        keys = _state_keys(live.run_id, request)
        return await _both(self.aq.lookup(RESULTS_QUEUE, keys), look_ahead(self.aq, live, request))

    async def _wake_miss(self, hand: Hand, payload: WakePayload) -> None:
        run_id, meta, wake = payload.run_id, payload.meta, hand.item
        wf = self.served.workflows.get(meta.workflow) if meta is not None else None
        if meta is not None and wf is not None:
            live = new_live(run_id, wf, started(meta), self.aq.clock)
            message = await resume(self.aq, live)
            if isinstance(message, StepCall | Gather) and not starts_runs(message):
                await self._drive(live, hand, message)
                return
            await live.close()  # it would do more than dispatch steps: from what is stored
        if (wake.dedup_key or "").removesuffix("/r").endswith(f"/wake/{RESUME_TAG}"):
            await apply_resume(self.aq, run_id)  # before the history is read
        self.counts["looked_up"] += 1
        history = await load_history(self.aq, run_id, tag_position(wake))
        if history.finished is not None:
            await self.committer.commit(hand, Hold(await self._end_again(history)))
            return
        if history.meta is None:
            raise Poison(f"run {run_id} has no stored meta record")
        timer = timer_ended(wake, history, self.aq.clock.now())
        if timer is not None:
            slept(run_id, timer.position, timer.since, timer.until, history.meta.trace)
        wf = self.served.workflows.get(history.meta.workflow)
        if wf is None:  # a wake written before routing: for the workers that serve it
            workflow = history.meta.workflow
            raise NotServed(f"workflow {workflow!r} is not served here", wake_kind(workflow))
        move = from_history(run_id, wf, history, self.aq.clock.now())
        if isinstance(move, Resume):
            self.counts["replayed"] += 1
            await self._drive(new_live(run_id, wf, history, self.aq.clock), hand)
        else:
            await self.committer.commit(hand, move)

    async def _end_again(self, history: History) -> Produce:
        """A child run that ended, whose parent is stored, has not ended and lacks
        its record of the child (a resume of the parent removed it): that record
        again, and the parent's wake."""
        parent = history.meta.parent if history.meta is not None else None
        if parent is None or history.meta is None or history.finished is None:
            return {}
        if history.finished.continued_as is not None:
            return {}  # its successor reports to the parent
        keys = [step_key(parent.run_id, parent.position), result_key(parent.run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, [*keys, meta_key(parent.run_id)])
        if any(key in found for key in keys) or meta_key(parent.run_id) not in found:
            return {}
        return parent_items(history.meta, history.finished)

    # -- driving a body -----------------------------------------------------------

    async def _drive(
        self,
        live: LiveRun,
        hand: Hand,
        message: Request | Finished | None = None,
        ahead: Ahead | None = None,
    ) -> None:
        """Resume ``live`` (unless ``message`` is what it already asked), commit
        its next move with the item in hand, and run the step it hands this
        worker, until it parks on something else or ends. ``ahead``: a recv's
        message (event) looked up with the wake (used once, for that wait)."""
        while True:
            answer: Request | Finished | RunRecord | None = message
            message = None
            if answer is None:
                late = timed_out(live.run_id, live.meta.deadline, self.aq.clock.now())
                # Past its deadline, the body is not resumed: the run times out.
                answer = late if late is not None else await resume(self.aq, live)
            hand = with_published(hand, live)  # set_event: stored with the next move
            read = await read_now(self.aq, live, answer, hand.item, ahead)
            ahead = None
            if read is not None:  # stored first: one outcome per recv, whoever reads
                stored = await store_read(self.aq, hand.item, live, answer, *read)
                if stored is None:
                    return await self.live.drop(live)
                await after_read(self.aq, live.run_id, answer, stored)
                continue
            answer = parked_on(answer, hand.item)  # a wait for an event: confirm once
            move = next_move(live, answer, carrying=bool(hand.produce))
            if not isinstance(move, Park):
                await self.live.drop(live)  # it ends, or goes on from what is stored
            claimed = await self.committer.commit(hand, move, live)
            if claimed is None:
                return
            went_on = await self._after_claim(live, claimed)
            if went_on is None:
                return
            live, hand = went_on

    async def _after_claim(self, live: LiveRun, claimed: Claimed) -> tuple[LiveRun, Hand] | None:
        """Run the step a commit handed this worker and resume ``live`` with its
        record: the body and what its next commit completes (None: the run goes
        on from a wake, or from the step item's retry)."""
        ran = await self._run_claimed(claimed)
        if ran is None:
            return None
        hand, payload, record = ran
        if self.live.limit == 0:  # no live bodies: every step is a miss (a replay)
            await self.live.drop(live)
        body, after = await self._with_record(live if self.live.limit else None, payload, record)
        if isinstance(after, WakeRun):
            await self.committer.commit(hand, after, body)
            return None
        assert body is not None  # resumed
        return body, hand

    async def go_on(self, live: LiveRun, claimed: Claimed) -> None:
        """Advance a run whose first step a commit made outside this engine handed
        it (``claimed``; ``live``: the body parked on that step, kept here), as far
        as this engine can (:mod:`.eager`)."""
        with log_fields(run_id=live.run_id):
            async with self.live.hold(live.run_id):
                went_on = await self._after_claim(live, claimed)
                if went_on is not None:
                    await self._drive(*went_on)

    async def _run_claimed(self, claimed: Claimed) -> tuple[Hand, StepPayload, StepRecord] | None:
        """Run the step item this worker handed itself: what to commit with it, and
        its record (None: nothing to resume the body with)."""
        held, payload, found = claimed
        stored = found.get(payload.record_key())
        if stored is not None:  # it ran already (the run advanced elsewhere too)
            return Hand(held), payload, StepRecord.model_validate_json(stored.payload)
        if self.runner.skipped(payload, found):
            await self.committer.commit(Hand(held), WakeRun(payload))
            return None
        step = self.served.step(payload.step, held.queue)
        assert step is not None  # claimed only when served
        self.counts["handed_over"] += 1
        self._held[held.id] = held
        try:
            ran = await self.runner.run(held, payload, step)
        finally:
            self._held.pop(held.id, None)
        if ran is None:
            return None  # retried or deferred: the body stays parked on it
        held, record = ran
        return Hand(held, self.runner.produce_for(payload, record)), payload, record
