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

When the body's next move cannot be decided here (a gather member ends while
others run elsewhere; a step of a workflow this worker does not run), the
commit produces a wake task instead, and whoever leases it decides from what
is committed then. Sagas run their bodies live too; a saga that fails, is
cancelled or passes its deadline is advanced by replay (:mod:`..sagas.advance`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from querator.errors import Conflict
from querator.queue.models import Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.telemetry import workflow_metrics
from querator.telemetry.logs import log_fields
from querator.telemetry.runs import joined, slept
from querator.workflows.engine.commit import (
    Produce,
    child_started,
    commit_final,
    commit_held,
    commit_wake,
    merge_items,
    not_colliding,
    parent_items,
    split_claim,
    transact_creating,
)
from querator.workflows.engine.context import (
    Child,
    Gather,
    Request,
    Sleep,
    StepCall,
    request_items,
    waited_positions,
)
from querator.workflows.engine.decisions import (
    ended_early,
    ending,
    needs_saga_path,
    resumes_on,
    satisfied,
    tag_position,
    timed_out,
    timer_ended,
)
from querator.workflows.engine.execute import StepRunner
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import History, load_history, started
from querator.workflows.engine.live import LiveRun, LiveRuns
from querator.workflows.engine.replay import evaluate, new_live, resume
from querator.workflows.engine.rerouting import NotServed
from querator.workflows.engine.resumption import apply_resume
from querator.workflows.engine.served import Served
from querator.workflows.errors import WorkflowError
from querator.workflows.functions import WorkflowFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    RESUME_TAG,
    RunRecord,
    StepPayload,
    StepRecord,
    WakePayload,
    aborted_key,
    cancel_key,
    compensating_key,
    meta_key,
    result_key,
    step_key,
    step_kind,
    wake_item,
    wake_kind,
)
from querator.workflows.sagas.advance import saga_advance
from querator.workflows.sagas.core import SagaFunction

__all__ = ["Engine", "Poison"]

log = logging.getLogger("querator.workflows")


class Poison(WorkflowError):
    """An item this worker cannot handle: dead-letter it (or drop it)."""


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
    ) -> None:
        self.aq = aq
        self.served = served
        self.runner = runner
        self.client_id = client_id
        self.live = LiveRuns(max_live_runs)
        self.active = active
        """False once the worker is stopping: it then hands itself nothing new."""
        self.counts: Counter[str] = Counter()
        self._held = held
        """The worker's items in hand (released on shutdown); steps this engine hands
        itself are added while they run."""

    # -- entry points ------------------------------------------------------------

    async def wake(self, wake: Leased, payload: WakePayload) -> None:
        """Advance the run a wake task names."""
        run_id = payload.run_id
        with joined(wake.headers), log_fields(run_id=run_id):
            await self._wake(wake, payload)
        await self.live.trim()

    async def _wake(self, wake: Leased, payload: WakePayload) -> None:
        run_id = payload.run_id
        async with self._locked(run_id, wake) as held:
            wake = held[0]
            live = self.live.get(run_id)
            if live is not None:
                await self._wake_live(wake, live)
            else:
                await self._wake_miss(wake, payload)

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
            await commit_wake(self.aq, leased, payload)
            return
        stored = found.get(payload.record_key())
        if stored is not None:
            log.info(
                "run %s step %s@%d already ran; waking the run",
                payload.run_id,
                payload.step,
                payload.position,
            )
            await commit_wake(self.aq, leased, payload)
            return
        ran = await self.runner.run(leased, payload, step)
        if ran is None:
            return
        current, record = ran
        await self._after_step(current, payload, record)

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

    # -- after a step -------------------------------------------------------------

    async def _after_step(self, current: Leased, payload: StepPayload, record: StepRecord) -> None:
        """Commit ``record`` and advance the run: resume its body when this worker
        runs the workflow and the body waits on nothing else; else wake the run."""
        produce = self.runner.produce_for(payload, record)
        if payload.slot is not None or payload.workflow_queue not in self.served.workflow_queues:
            await commit_wake(self.aq, current, payload, produce)  # compensations: sagas use wakes
            return
        async with self._locked(payload.run_id, current) as held:
            current = held[0]
            live = await self._resumable(current, payload, record, produce)
            if live is not None:
                await self._drive(live, current, produce, None)

    async def _resumable(
        self, current: Leased, payload: StepPayload, record: StepRecord, produce: Produce
    ) -> LiveRun | None:
        """The run's body (live here, or replayed on a miss) with ``record`` added,
        when that is all it waits for: resume it. Otherwise (None) ``record`` is
        committed here with a wake for the run. The caller holds the run's lock."""
        run_id, position = payload.run_id, payload.position
        live = self.live.get(run_id)
        message: Request | Finished | None = None
        if live is None:
            replayed = await self._replay(run_id, position)
            if replayed is not None:
                live, message = replayed
        request = live.request if message is None and live is not None else message
        if live is not None and resumes_on(live, request, position):
            if not await self._stopped(live, record):
                live.ctx.add(position, record)
                return live
            await self.live.drop(live)
            live = None
        await commit_wake(self.aq, current, payload, produce)
        if live is not None and live.request is not None:
            if position in waited_positions(live.request):
                live.ctx.add(position, record)  # committed: a gather's other members need it
        elif live is not None:
            await live.close()  # replayed, but parked on nothing committed
        return None

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
        if wf is None or needs_saga_path(wf, history, self.aq.clock.now()):
            return None
        if ended_early(run_id, history, self.aq.clock.now()) is not None:
            return None
        self.counts["replayed"] += 1
        live = new_live(run_id, wf, history, self.aq.clock)
        return live, await resume(self.aq, live)

    # -- wakes ---------------------------------------------------------------------

    async def _wake_live(self, wake: Leased, live: LiveRun) -> None:
        run_id = live.run_id
        request = live.request
        assert request is not None
        waits = waited_positions(request)
        keys = [result_key(run_id), cancel_key(run_id), compensating_key(run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, keys + [step_key(run_id, p) for p in waits])
        if any(key in found for key in keys) or timed_out(
            run_id, live.meta.deadline, self.aq.clock.now()
        ):
            await self.live.drop(live)  # ended, cancelled or compensating: from what is stored
            await self._wake_miss(wake, WakePayload(run_id=run_id))
            return
        for position in waits:
            item = found.get(step_key(run_id, position))
            if item is not None and position not in live.ctx.records:
                live.ctx.add(
                    position, StepRecord.model_validate_json(item.payload), item.created_at
                )
        if satisfied(live, request):
            self.counts["resumed"] += 1
            if isinstance(request, Sleep):
                since = request.since or request.until
                slept(run_id, request.position, since, request.until, live.meta.trace)
            await self._drive(live, wake, {}, None)
            return
        # Not there yet (a wake for another member, or one that came early): a
        # timer's wake is produced again (a no-op, but for an early wake).
        produce: Produce = {}
        if isinstance(request, Sleep):
            again = wake_item(
                run_id,
                str(request.position),
                request.until,
                trace=live.meta.trace,
                workflow=live.meta.workflow,
            )
            produce = {live.ctx.workflow_queue: [again]}
        await commit_held(self.aq, wake, produce)

    async def _wake_miss(self, wake: Leased, payload: WakePayload) -> None:
        run_id, meta = payload.run_id, payload.meta
        wf = self.served.workflows.get(meta.workflow) if meta is not None else None
        if meta is not None and wf is not None:
            live = new_live(run_id, wf, started(meta), self.aq.clock)
            message = await resume(self.aq, live)
            if isinstance(message, StepCall | Gather):
                await self._drive(live, wake, {}, message)
                return
            await live.close()  # it would do more than dispatch steps: from what is stored
        if (wake.dedup_key or "").removesuffix("/r").endswith(f"/wake/{RESUME_TAG}"):
            await apply_resume(self.aq, run_id)  # before the history is read
        self.counts["looked_up"] += 1
        history = await load_history(self.aq, run_id, tag_position(wake))
        if history.finished is not None:
            await commit_held(self.aq, wake, await self._end_again(history))
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
        if needs_saga_path(wf, history, self.aq.clock.now()):
            await self._saga(wake, run_id, wf, history)
            return
        final = ended_early(run_id, history, self.aq.clock.now())
        if final is not None:
            await commit_final(self.aq, wake, {}, run_id, history.meta, final)
            return
        self.counts["replayed"] += 1
        live = new_live(run_id, wf, history, self.aq.clock)
        await self._drive(live, wake, {}, None)

    async def _end_again(self, history: History) -> Produce:
        """A child run that ended, whose parent is stored, has not ended and lacks
        its record of the child (a resume of the parent removed it): that record
        again, and the parent's wake."""
        parent = history.meta.parent if history.meta is not None else None
        if parent is None or history.meta is None or history.finished is None:
            return {}
        keys = [step_key(parent.run_id, parent.position), result_key(parent.run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, [*keys, meta_key(parent.run_id)])
        if any(key in found for key in keys) or meta_key(parent.run_id) not in found:
            return {}
        return parent_items(history.meta, history.finished)

    # -- driving a body -----------------------------------------------------------

    async def _drive(
        self,
        live: LiveRun,
        held: Leased,
        produce: Produce,
        message: Request | Finished | RunRecord | None,
    ) -> None:
        """Resume ``live`` (unless ``message`` is what it already asked), commit
        its next request with ``held`` completed and ``produce``, and run the
        step it hands this worker, until it parks on something else or ends."""
        while True:
            if message is None:
                late = timed_out(live.run_id, live.meta.deadline, self.aq.clock.now())
                # Past its deadline, the body is not resumed: the run times out.
                message = late if late is not None else await resume(self.aq, live)
            chained = await self._commit_request(live, held, produce, message)
            if chained is None:
                return
            held, payload, found = chained
            ran = await self._run_claimed(held, payload, found)
            if ran is None:
                return
            held, record, produce = ran
            message = None
            if await self._stopped(live, record):
                await self.live.drop(live)
                await commit_wake(self.aq, held, payload, produce)
                return
            if self.live.limit == 0:  # no live bodies: every step is a miss (a replay)
                await self.live.drop(live)
                resumable = await self._resumable(held, payload, record, produce)
                if resumable is None:
                    return
                live = resumable
            else:
                live.ctx.add(payload.position, record)

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

    async def _run_claimed(
        self, held: Leased, payload: StepPayload, found: dict[str, StoredItem]
    ) -> tuple[Leased, StepRecord, Produce] | None:
        """Run the step item this worker handed itself: its latest version, its
        record and what to commit with it (None: nothing to resume the body with)."""
        stored = found.get(payload.record_key())
        if stored is not None:  # it ran already (the run advanced elsewhere too)
            return held, StepRecord.model_validate_json(stored.payload), {}
        if self.runner.skipped(payload, found):
            await commit_wake(self.aq, held, payload)
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
        return held, record, self.runner.produce_for(payload, record)

    async def _commit_request(
        self, live: LiveRun, held: Leased, produce: Produce, message: Request | Finished | RunRecord
    ) -> tuple[Leased, StepPayload, dict[str, StoredItem]] | None:
        """Commit what the body asks (``message``) with ``held`` completed and
        ``produce``; the step item handed to this worker, if any."""
        run_id = live.run_id
        to_saga, final = ending(live, message)
        if to_saga:
            await self.live.drop(live)
            if produce:  # store the step's record first; the wake compensates
                saga = wake_item(run_id, "saga", trace=live.meta.trace, workflow=live.meta.workflow)
                wake = {live.ctx.workflow_queue: [saga]}
                await commit_held(self.aq, held, merge_items(produce, wake))
            else:
                history = await load_history(self.aq, run_id, live.ctx.position)
                await self._saga(held, run_id, live.wf, history)
            return None
        if final is not None:
            await self.live.drop(live)
            await commit_final(self.aq, held, produce, run_id, live.meta, final)
            return None
        assert not isinstance(message, Finished | RunRecord)
        with child_started(live.meta.trace, message) as request:
            return await self._commit_next(live, held, produce, request)

    async def _commit_next(
        self, live: LiveRun, held: Leased, produce: Produce, request: Request
    ) -> tuple[Leased, StepPayload, dict[str, StoredItem]] | None:
        """:meth:`_commit_request` of what comes next in the run (not its end)."""
        run_id = live.run_id
        items = request_items(run_id, live.ctx, request, live.meta.trace)
        payloads = {}
        if isinstance(request, StepCall):
            payloads = {items[request.queue][0].dedup_key or "": request.payload}
        rest, claim = (items, None)
        if self.active():
            rest, claim = split_claim(items, payloads, self.served.can_run)
        everything = not_colliding(held, merge_items(produce, rest))
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
        self._parked(live, request)
        if claim is None or result is None:
            return None
        [leased] = result.leased.get(claim.queue, [None])
        if leased is None:
            return None  # produced, but not leasable now: the queue hands it out
        return leased, claim.payload, result.found.get(RESULTS_QUEUE, {})

    def _parked(self, live: LiveRun, request: Request) -> None:
        """Keep ``live``, parked on ``request`` (committed)."""
        live.request = request
        self.live.keep(live)
        if isinstance(request, Child):
            workflow_metrics.run_started(request.meta.workflow)

    async def _saga(
        self, held: Leased, run_id: str, wf: WorkflowFunction[..., Any], history: History
    ) -> None:
        """Advance a saga that failed, is cancelled, timed out or compensating."""
        assert history.meta is not None

        async def body() -> Any:
            return await evaluate(self.aq, run_id, wf, history)

        final, produce = await saga_advance(self.aq, run_id, history.meta, body)
        if final is None:
            await commit_held(self.aq, held, produce)
        else:
            await commit_final(self.aq, held, produce, run_id, history.meta, final)
