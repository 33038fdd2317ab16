"""Replaying a run: fetch its history, run the body, advance the run in one transaction."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from querator.errors import Conflict, QueueNotFound
from querator.queue.models import Item, Leased, StoredItem, TransactResult
from querator.queue.service import AsyncQuerator
from querator.workflows.engine.context import CURRENT, ReplayContext
from querator.workflows.engine.continuation import Claim, Continuation, split_claim
from querator.workflows.errors import WorkflowCancelled, WorkflowTimeout
from querator.workflows.functions import WorkflowFunction
from querator.workflows.layout import (
    PREFETCH,
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    STEP_KIND,
    WORK_SETTINGS,
    CancelRecord,
    ErrorInfo,
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
    awaited_record,
    cancel_key,
    error_info,
    meta_key,
    record_item,
    result_key,
    step_key,
    wake_item,
)
from querator.workflows.sagas.advance import saga_advance
from querator.workflows.sagas.core import SagaFunction

log = logging.getLogger("querator.workflows")


@dataclass(frozen=True)
class History:
    """What is stored about a run."""

    meta: RunMeta | None
    records: dict[int, StepRecord]
    finished: RunRecord | None
    cancel: CancelRecord | None = None
    known: int = 0
    """Positions below this were looked up (records beyond it are not loaded)."""
    created: dict[int, datetime] = field(default_factory=dict)
    """When each step record was stored (sagas compensate in reverse of this)."""


async def _load_records(
    aq: AsyncQuerator,
    run_id: str,
    records: dict[int, StepRecord],
    start: int,
    upto: int,
    created: dict[int, datetime],
) -> tuple[int, dict[str, bytes]]:
    """Look up windows of PREFETCH positions from ``start`` while they hold records
    (and at least up to ``upto``); returns the first position not looked up."""
    heads = [meta_key(run_id), result_key(run_id), cancel_key(run_id)] if start == 0 else []
    found_heads: dict[str, bytes] = {}
    while True:
        keys = [step_key(run_id, i) for i in range(start, start + PREFETCH)]
        found = await aq.lookup(RESULTS_QUEUE, heads + keys)
        found_heads.update({k: found[k].payload for k in heads if k in found})
        heads = []
        hits = [offset for offset, key in enumerate(keys) if key in found]
        for offset in hits:
            records[start + offset] = StepRecord.model_validate_json(found[keys[offset]].payload)
            created[start + offset] = found[keys[offset]].created_at
        start += PREFETCH
        # Gathered steps finish out of order: a window with gaps may be followed
        # by records; an empty window past ``upto`` ends the history.
        if not hits and start > upto:
            return start, found_heads


async def load_history(aq: AsyncQuerator, run_id: str) -> History:
    """Meta, result, cancel request and step records (PREFETCH per lookup)."""
    records: dict[int, StepRecord] = {}
    created: dict[int, datetime] = {}
    known, heads = await _load_records(aq, run_id, records, 0, 0, created)
    meta, finished, cancel = (
        heads.get(key) for key in (meta_key(run_id), result_key(run_id), cancel_key(run_id))
    )
    return History(
        RunMeta.model_validate_json(meta) if meta else None,
        records,
        RunRecord.model_validate_json(finished) if finished else None,
        CancelRecord.model_validate_json(cancel) if cancel else None,
        known,
        created,
    )


NOTHING_LOADED = 1 << 62
"""``History.known`` of a history holding every record there is."""


def started(meta: RunMeta) -> History:
    """The history a run's start wake knows of: its meta and nothing else.

    True while the start wake is leasable, as far as steps go: only its replay
    dispatches a run's first step, and the commit doing so completes it. What
    may exist anyway changes no step's outcome: a cancel request, which every
    step item looks up before it runs, or the records of a run started again
    with the same idempotency key after its start wake was consumed, which
    each step item finds as its own record. A replay that would do anything
    but dispatch steps (end the run, sleep, start a child) is redone from what
    is stored (:func:`replay_started`), so a cancel request stored meanwhile
    stops it. A deadline could end a run before its start wake runs: a run
    with one gets no meta in its start wake and is looked up.
    """
    return History(meta, {}, None, None, known=NOTHING_LOADED)


SLOW_REPLAY = 0.1
"""Seconds of one replay of a body after which the worker logs a warning."""


async def _run_body(wf: WorkflowFunction[..., Any], ctx: ReplayContext, args_text: str) -> Any:
    """Evaluate the body once. A sync body runs right here, on the worker's
    event loop (no thread hop): it is orchestration only, every call in it
    returns a stored result or suspends at once."""
    args, kwargs = wf.codec.decode_args(args_text)
    token = CURRENT.set(ctx)
    began = time.monotonic()
    try:
        if wf.is_async:
            return await wf.fn(*args, **kwargs)
        return wf.fn(*args, **kwargs)
    finally:
        CURRENT.reset(token)
        took = time.monotonic() - began
        if took > SLOW_REPLAY and not wf.is_async:
            log.warning(
                "run %s: one replay of workflow %s took %.3fs on the event loop; "
                "a workflow body should only orchestrate (do the work in steps)",
                ctx.run_id,
                wf.name,
                took,
            )


async def evaluate(
    wf: WorkflowFunction[..., Any], ctx: ReplayContext, args_text: str
) -> RunRecord | None:
    """Run the body once; the run's final record, or None when the replay suspended."""
    error: Exception | None = None
    value: Any = None
    try:
        value = await _run_body(wf, ctx, args_text)
    except Exception as exc:
        error = exc
    if ctx.fatal is not None:
        return RunRecord(ok=False, error=error_info(ctx.fatal))
    if ctx.suspended is not None:
        return None
    if error is None:
        try:
            return RunRecord(ok=True, result=wf.codec.encode_result(value))
        except Exception as exc:
            error = exc
    return RunRecord(ok=False, error=error_info(error))


def _ended_early(run_id: str, history: History, now: datetime) -> RunRecord | None:
    """The final record of a cancelled or timed-out run (None: replay the body)."""
    if history.cancel is not None:
        # The stored message is the reason alone: result() raises WorkflowCancelled with it.
        error = ErrorInfo(type=WorkflowCancelled.__qualname__, message=history.cancel.reason)
        return RunRecord(ok=False, error=error, cancelled=True)
    assert history.meta is not None
    deadline = history.meta.deadline
    if deadline is not None and now >= deadline:
        timeout = WorkflowTimeout(f"run {run_id} timed out at {deadline.isoformat()}")
        return RunRecord(ok=False, error=error_info(timeout))
    return None


@dataclass
class Outcome:
    """What one replay found: the final record (None: suspended), its context,
    and for a saga being aborted (cancel, timeout) the reason."""

    final: RunRecord | None
    ctx: ReplayContext
    created: dict[int, datetime]
    abort: RunRecord | None = None


async def _run(
    aq: AsyncQuerator, run_id: str, wf: WorkflowFunction[..., Any], history: History
) -> Outcome:
    """Evaluate the body, loading more records while it reaches past the loaded ones.

    A cancelled or timed-out run ends without its body, except a saga's: its
    body is replayed without dispatching anything, to learn what to compensate.
    """
    assert history.meta is not None
    records, known, created = dict(history.records), history.known, dict(history.created)
    is_saga = isinstance(wf, SagaFunction)
    while True:
        now = datetime.now(UTC)
        ctx = ReplayContext(run_id, history.meta.queue, records, now, known=known)
        final = abort = _ended_early(run_id, history, now)
        if abort is not None and is_saga:
            ctx.dispatching, final = False, None
        if final is None:
            final = await evaluate(wf, ctx, history.meta.args)
        if ctx.need is None or ctx.fatal is not None:
            return Outcome(final, ctx, created, abort if is_saga else None)
        known, _ = await _load_records(aq, run_id, records, known, ctx.need, created)


def final_items(run_id: str, meta: RunMeta, final: RunRecord) -> dict[str, list[Item]]:
    """The run's result record, and for a child run its parent's record and wake."""
    produce = {RESULTS_QUEUE: [record_item(result_key(run_id), final, run_id)]}
    parent = meta.parent
    if parent is not None:
        record = StepRecord(
            step=meta.workflow, ok=final.ok, result=final.result, error=final.error, attempts=1
        )
        key = step_key(parent.run_id, parent.position)
        produce[RESULTS_QUEUE].append(record_item(key, record, parent.run_id))
        produce[parent.queue] = [wake_item(parent.run_id, str(parent.position))]
    return produce


def _not_colliding(wake: Leased, produce: dict[str, list[Item]]) -> dict[str, list[Item]]:
    """Rename a produced item holding the dedup key of the wake being completed.

    Completing an item and producing its key in one transaction would dedup the
    new item into the one being deleted; ``{key}/r`` (and back) keeps both apart.
    """
    key = wake.dedup_key
    if key is None or wake.queue not in produce:
        return produce
    other = key[: -len("/r")] if key.endswith("/r") else key + "/r"
    items = [
        item.model_copy(update={"dedup_key": other}) if item.dedup_key == key else item
        for item in produce[wake.queue]
    ]
    return {**produce, wake.queue: items}


@dataclass(frozen=True)
class Chained:
    """A step item this worker produced leased to itself: run it next, with the
    run's history as the commit left it (no wake, no lease round trip)."""

    leased: Leased
    payload: StepPayload
    history: History
    found: dict[str, StoredItem]
    """The records of ``payload.start_keys()`` as the commit that produced the item
    left them (so the step starts without looking them up again)."""


@dataclass(frozen=True)
class Advance:
    """What to commit with the item being completed: items to produce, and
    the step item to produce leased to this worker (``claim``)."""

    produce: dict[str, list[Item]]
    claim: Claim | None = None
    history: History | None = None
    """The run's history after this advance (for the claimed step's own advance)."""

    async def commit(
        self, aq: AsyncQuerator, done: Leased, cont: Continuation | None
    ) -> Chained | None:
        """Complete ``done`` and produce everything in one transaction; the claimed
        step, when it came back leased."""
        claim = self.claim
        if claim is None or cont is None:
            await transact_creating(aq, [done], self.produce)
            return None
        result = await transact_creating(
            aq,
            [done],
            self.produce,
            {claim.queue: [claim.item]},
            cont.client_id,
            lookup={RESULTS_QUEUE: claim.payload.start_keys()},
        )
        [leased] = result.leased.get(claim.queue, [None])
        if leased is None or self.history is None:
            return None  # produced, but not leasable now: the queue hands it out
        found = result.found.get(RESULTS_QUEUE, {})
        return Chained(leased, claim.payload, self.history, found)


def _log_final(run_id: str, final: RunRecord) -> None:
    status = final.status or (
        "cancelled" if final.cancelled else "completed" if final.ok else "failed"
    )
    log.info("run %s %s%s", run_id, status, "" if final.ok else f": {final.error}")


def _after(history: History, outcome: Outcome) -> History:
    """The history a replay saw (with the records it loaded on the way)."""
    return History(
        history.meta,
        outcome.ctx.records,
        None,
        history.cancel,
        outcome.ctx.known,
        outcome.created,
    )


async def replay(
    aq: AsyncQuerator,
    wake: Leased,
    run_id: str,
    wf: WorkflowFunction[..., Any],
    history: History,
    cont: Continuation | None = None,
) -> Chained | None:
    """Replay ``run_id`` for the leased ``wake`` task and advance the run; returns
    the step it dispatched to this worker (see :mod:`continuation`), if any."""
    assert history.meta is not None
    outcome = None
    if isinstance(wf, SagaFunction):
        final, produce = await advance_saga(aq, run_id, wf, history)
    else:
        outcome = await _run(aq, run_id, wf, history)
        final, produce = outcome.final, outcome.ctx.produce
    if final is not None:
        advance = Advance(merge_items(produce, final_items(run_id, history.meta, final)))
        _log_final(run_id, final)
    elif outcome is None:  # a saga: it advances by wakes
        advance = Advance(_not_colliding(wake, produce))
    else:
        return await _suspend(aq, wake, run_id, history, outcome, cont)
    return await _commit(aq, wake, run_id, advance, cont)


async def replay_started(
    aq: AsyncQuerator,
    wake: Leased,
    run_id: str,
    wf: WorkflowFunction[..., Any],
    meta: RunMeta,
    cont: Continuation | None = None,
) -> tuple[bool, Chained | None]:
    """:func:`replay` for a run's start wake, from the meta it carries, without
    looking the run up (see :func:`started`): (True, what :func:`replay` returns)
    when the body suspends on steps only; (False, None) when it would do anything
    else (end the run, sleep, start a child), which a cancel request stored
    meanwhile must be able to stop: replay the run from what is stored instead.
    """
    history = started(meta)
    outcome = await _run(aq, run_id, wf, history)
    produced = [item for items in outcome.ctx.produce.values() for item in items]
    if outcome.final is not None or not produced or any(i.kind != STEP_KIND for i in produced):
        return False, None
    return True, await _suspend(aq, wake, run_id, history, outcome, cont)


async def _suspend(
    aq: AsyncQuerator,
    wake: Leased,
    run_id: str,
    history: History,
    outcome: Outcome,
    cont: Continuation | None,
) -> Chained | None:
    """Commit a suspended replay: what it produced, the step it claims."""
    log.debug("run %s suspended: %s", run_id, outcome.ctx.suspended)
    produce = _not_colliding(wake, outcome.ctx.produce)
    rest, claim = split_claim(cont, produce, outcome.ctx.payloads)
    return await _commit(aq, wake, run_id, Advance(rest, claim, _after(history, outcome)), cont)


async def _commit(
    aq: AsyncQuerator, wake: Leased, run_id: str, advance: Advance, cont: Continuation | None
) -> Chained | None:
    try:
        return await advance.commit(aq, wake, cont)
    except Conflict as exc:
        log.warning("run %s: wake task lost its lease, replay dropped (%s)", run_id, exc)
        return None


async def advance_after_step(
    aq: AsyncQuerator,
    cont: Continuation,
    payload: StepPayload,
    record: StepRecord,
    history: History | None,
) -> Advance | None:
    """Eager continuation: replay the run as if ``record`` (the step's outcome,
    about to be committed) were stored, and return what to commit with it
    instead of a wake task. None: commit a wake, as without continuation.

    The replay may miss records that other workers commit meanwhile (a
    fan-out's other members); it is trusted only when the run ends or when
    every step it waits for is one it dispatches now (so each of those will in
    turn advance the run when it ends). Otherwise, and for sagas, workflows
    this worker does not know and finished runs, a wake replays the run later
    from what is committed then.
    """
    if history is None:
        if payload.workflow_queue not in cont.queues:
            return None  # a step pool without the workflow: do not look it up
        history = await load_history(aq, payload.run_id)
    meta = history.meta
    if meta is None or history.finished is not None:
        return None
    wf = cont.workflows.get(meta.workflow)
    if wf is None or isinstance(wf, SagaFunction):
        return None
    run_id = payload.run_id
    records = {**history.records, payload.position: record}
    created = {**history.created, payload.position: record.finished_at}
    seen = History(meta, records, None, history.cancel, history.known, created)
    outcome = await _run(aq, run_id, wf, seen)
    final, ctx = outcome.final, outcome.ctx
    if final is not None:
        _log_final(run_id, final)
        return Advance(merge_items(ctx.produce, final_items(run_id, meta, final)))
    if not set(ctx.awaited) <= set(ctx.dispatched):
        return None
    rest, claim = split_claim(cont, ctx.produce, ctx.payloads)
    return Advance(rest, claim, _after(seen, outcome))


def merge_items(*parts: dict[str, list[Item]]) -> dict[str, list[Item]]:
    """The items of ``parts`` together, per queue, in order."""
    merged: dict[str, list[Item]] = {}
    for part in parts:
        for queue, items in part.items():
            merged.setdefault(queue, []).extend(items)
    return merged


async def advance_saga(
    aq: AsyncQuerator, run_id: str, wf: WorkflowFunction[..., Any], history: History
) -> tuple[RunRecord | None, dict[str, list[Item]]]:
    """A saga's replay: its body until it fails, then its compensations one by one.

    Returns the run's final record (None: not ended) and what to produce.
    """
    assert history.meta is not None

    async def body() -> Outcome:
        return await _run(aq, run_id, wf, history)

    return await saga_advance(aq, run_id, history.meta, body)


async def transact_creating(
    aq: AsyncQuerator,
    complete: list[Leased],
    produce: dict[str, list[Item]],
    produce_leased: dict[str, list[Item]] | None = None,
    client_id: str | None = None,
    lookup: dict[str, list[str]] | None = None,
) -> TransactResult:
    """Complete and produce at once, creating missing target queues first
    (``lookup``: see :meth:`AsyncQuerator.transact`).

    Step records nobody waits for do not wake the results queue's watchers
    (``result()`` calls): only a run's end and a saga's compensation do.
    """
    targets = set(produce) | set(produce_leased or {}) | set(lookup or {})
    records = produce.get(RESULTS_QUEUE, [])
    quiet = records and not any(
        item.dedup_key is None or awaited_record(item.dedup_key) for item in records
    )
    silent = (RESULTS_QUEUE,) if quiet else ()
    attempts = len(targets) + 1
    for attempt in range(attempts + 1):
        try:
            return await aq.transact(
                complete=complete,
                produce=produce,
                produce_leased=produce_leased,
                client_id=client_id,
                lookup=lookup,
                silent=silent,
            )
        except QueueNotFound as exc:
            if exc.queue not in targets or attempt == attempts:
                raise
            settings = RESULTS_SETTINGS if exc.queue == RESULTS_QUEUE else WORK_SETTINGS
            await aq.create_queue(exc.queue, settings, exist_ok=True)
    raise AssertionError("unreachable: the last attempt returns or raises")
