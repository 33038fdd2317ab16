"""Starting runs and watching them: ``start`` / ``start_async`` and run handles."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Any, Generic, overload

import anyio
from typing_extensions import TypeVar

from querator.clock import using
from querator.errors import InvalidArgument, QueueNotFound, RequestTimeout, Unavailable
from querator.queue.client import QueueClient
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration, check_flag, check_name, check_priority
from querator.telemetry import runs as runs_telemetry
from querator.workflows.attributes import AttributeValue, check_attributes
from querator.workflows.debounce import Debounce, debounced_start
from querator.workflows.engine.commit import Produce, merge_items, transact_creating
from querator.workflows.engine.eager import run_eagerly
from querator.workflows.errors import (
    IdempotencyConflict,
    RunExists,
    RunNotFound,
    SagaFailed,
    WorkflowCancelled,
    WorkflowFailed,
)
from querator.workflows.functions import WorkflowFunction
from querator.workflows.idempotency import (
    IdReusePolicy,
    check_reuse_policy,
    keyed_run_id,
    latest_keyed_run,
    reuses,
)
from querator.workflows.keys import (
    RESULTS_QUEUE,
    WORKFLOW_QUEUE,
    cancel_key,
    compensating_key,
    meta_key,
    new_run_id,
    result_key,
    resume_key,
)
from querator.workflows.result_lookups import shared_lookups
from querator.workflows.sagas.compensation import load_saga_state, redrive
from querator.workflows.sagas.core import pending_status
from querator.workflows.stored import (
    CancelRecord,
    RunMeta,
    RunRecord,
    RunStatus,
    record_item,
    start_items,
    wake_item,
)

__all__ = ["AsyncRunHandle", "RunHandle", "RunStatus", "start", "start_async"]

log = logging.getLogger("querator.workflows")

R = TypeVar("R", default=Any)
"""What a run's workflow returns (``Any`` for a handle re-attached by run id)."""

WAIT_SLICE = 5.0
"""Longest wait between two looks at a run's result (a safety net: wakeups end waits)."""


class AsyncRunHandle(Generic[R]):
    """A started run, for async code: its id, status and result (of type ``R``,
    the workflow's return type, when the handle comes from ``start``)."""

    def __init__(
        self, aq: AsyncQueueClient, run_id: str, workflow: WorkflowFunction[..., Any] | None = None
    ) -> None:
        self.aq = aq
        self.run_id = run_id
        """The run's id (derived from the idempotency key when one was given)."""
        self.workflow = workflow
        self.ended: RunRecord | None = None
        """The run's result record, when the handle comes from an eager start
        that ended the run (:meth:`result` then needs no look-up)."""
        self.debounced = False
        """Whether the handle comes from a debounced start: its :meth:`result`
        then waits for the run to be stored (until then :meth:`status` raises
        :class:`~querator.workflows.errors.RunNotFound`)."""

    async def _finished(self) -> RunRecord | None:
        """The result record; for a ``compensation_failed`` saga, raises SagaFailed;
        for a run that is not stored, RunNotFound."""
        run_id = self.run_id
        keys = [result_key(run_id), compensating_key(run_id), meta_key(run_id), resume_key(run_id)]
        found = await shared_lookups(self.aq).lookup(keys)
        item = found.get(keys[0])
        if item is not None and keys[3] not in found:  # a resumed run's old end is moot
            return RunRecord.model_validate_json(item.payload)
        if keys[2] not in found:
            raise RunNotFound(self.run_id)
        if keys[1] in found:
            state = await load_saga_state(self.aq, self.run_id)
            if state is not None and pending_status(state) == "compensation_failed":
                error = state.compensating.error
                raise SagaFailed(
                    self.run_id, error.type, error.message, "compensation_failed", state.ran()
                )
        return None

    async def status(self) -> RunStatus:
        """``"running"``, ``"completed"``, ``"failed"`` or ``"cancelled"``; for a
        saga also ``"compensating"``, ``"compensated"`` or ``"compensation_failed"``.

        RunNotFound for an unknown run. A run whose cancellation was asked
        for stays ``"running"`` until a worker ends it (a saga: ``"compensating"``
        while its compensations run); a resumed run is ``"running"`` at once.
        """
        keys = [meta_key(self.run_id), result_key(self.run_id), compensating_key(self.run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, [*keys, resume_key(self.run_id)])
        if keys[1] in found and resume_key(self.run_id) not in found:
            return RunRecord.model_validate_json(found[keys[1]].payload).final_status()
        if keys[2] in found:
            return pending_status(await load_saga_state(self.aq, self.run_id))
        if keys[0] in found:
            return "running"
        raise RunNotFound(self.run_id)

    async def retry_compensation(self) -> bool:
        """Run the failed compensation of a ``compensation_failed`` saga again.

        Returns False (and changes nothing) when the run is not
        ``compensation_failed``. The saga goes back to ``compensating``; the
        compensation runs with a fresh retry budget, and the ones after it follow.
        """
        return await redrive(self.aq, self.run_id)

    async def cancel(self, reason: str = "") -> bool:
        """Ask for the run to end as ``"cancelled"``; False when it had already ended.

        Writes ``{run}/cancel`` and a wake task: the next replay ends the run
        (:meth:`result` then raises :class:`WorkflowCancelled`), and steps not
        yet started are skipped. A step already running finishes, but its
        result is not used. The run's running children are then closed by
        their parent-close policy (``"cancel"`` by default: cancelled with it;
        see :meth:`WorkflowFunction.with_options`).
        """
        keys = [meta_key(self.run_id), result_key(self.run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, keys)
        if keys[1] in found:
            return False
        if keys[0] not in found:
            raise RunNotFound(self.run_id)
        meta = RunMeta.model_validate_json(found[keys[0]].payload)
        cancel = CancelRecord(reason=reason, requested_at=self.aq.clock.now())
        record = record_item(cancel_key(self.run_id), cancel, self.run_id)
        wake = wake_item(self.run_id, "cancel", trace=meta.trace, workflow=meta.workflow)
        await self.aq.transact(produce={RESULTS_QUEUE: [record], meta.queue: [wake]})
        return True

    async def _poll_once(self, outage: Outage, backoff: Backoff) -> tuple[RunRecord | None, float]:
        """The result record if the run ended, and how long to wait if not."""
        try:
            record = await self._finished()
        except (RunNotFound, QueueNotFound):
            if not self.debounced:
                raise
            return None, WAIT_SLICE  # its debounce window is still open
        except Unavailable as exc:  # ride through a store restart until our timeout
            outage.lost(exc)
            return None, backoff.next()
        outage.back()
        backoff.reset()
        return record, WAIT_SLICE

    async def result(self, timeout: float | None = None) -> R:
        """Wait for the run to end; its result, or :class:`WorkflowFailed`.

        Raises :class:`RequestTimeout` after ``timeout`` seconds (None: wait
        forever). Waiting does not poll: it sleeps until the results queue is
        woken (a record was written by any worker) and then looks once. While
        the store is unavailable (a restart, a failover) it keeps trying, with
        capped backoff, until its timeout, and logs the outage once.
        """
        if timeout is not None:
            timeout = check_duration("timeout", timeout, allow_zero=True)
        deadline = None if timeout is None else anyio.current_time() + timeout
        handle: AsyncRunHandle[R] = self
        while True:  # along a chain of runs that continued as new, to its last
            record = handle.ended or await handle._ended(deadline, timeout)
            if record.continued_as is None:
                break
            handle = AsyncRunHandle(self.aq, record.continued_as, self.workflow)
        return handle._outcome(record)

    async def _ended(self, deadline: float | None, timeout: float | None) -> RunRecord:
        """The run's result record, once it ended (RequestTimeout at ``deadline``)."""
        watch = self.aq.watch(RESULTS_QUEUE)
        outage, backoff = Outage(log, f"run {self.run_id}: result()"), Backoff()
        while True:
            record, wait = await self._poll_once(outage, backoff)
            if record is not None:
                return record
            left = WAIT_SLICE if deadline is None else deadline - anyio.current_time()
            if left <= 0:
                raise RequestTimeout(f"run {self.run_id} did not finish within {timeout}s")
            await watch.wait(min(left, wait))

    def _outcome(self, record: RunRecord) -> R:
        """What :meth:`result` returns (or raises) for the run's result ``record``."""
        if record.saga and not record.ok:
            error = record.error
            raise SagaFailed(
                self.run_id,
                error.type if error else "Exception",
                error.message if error else "",
                record.status or ("cancelled" if record.cancelled else "failed"),
                record.compensations,
            )
        if record.cancelled:
            raise WorkflowCancelled(self.run_id, record.error.message if record.error else "")
        if not record.ok:
            error = record.error
            raise WorkflowFailed(
                self.run_id, error.type if error else "Exception", error.message if error else ""
            )
        assert record.result is not None
        if self.workflow is not None:
            decoded: R = self.workflow.codec.decode_result(record.result)
            return decoded
        loaded: R = json.loads(record.result)
        return loaded


class RunHandle(Generic[R]):
    """A started run, for sync code (see :class:`AsyncRunHandle`).

    ``RunHandle(q, run_id)`` re-attaches to a run by id (its result is then the
    stored JSON, decoded as plain JSON types)."""

    def __init__(
        self, q: QueueClient, run_id: str, workflow: WorkflowFunction[..., Any] | None = None
    ) -> None:
        self.q = q
        self.run_id = run_id
        """The run's id."""
        self._async: AsyncRunHandle[R] = AsyncRunHandle(q.aio, run_id, workflow)

    def status(self) -> RunStatus:
        """See :meth:`AsyncRunHandle.status`."""
        return self.q.call(self._async.status)

    def result(self, timeout: float | None = None) -> R:
        """See :meth:`AsyncRunHandle.result`."""
        ended = self._async.ended
        if ended is not None and ended.continued_as is None:  # an eager start's end:
            if timeout is not None:  # nothing to wait for, so no hop to the loop
                check_duration("timeout", timeout, allow_zero=True)
            return self._async._outcome(ended)
        return self.q.call(self._async.result, timeout)

    def cancel(self, reason: str = "") -> bool:
        """See :meth:`AsyncRunHandle.cancel`."""
        return self.q.call(self._async.cancel, reason)

    def retry_compensation(self) -> bool:
        """See :meth:`AsyncRunHandle.retry_compensation`."""
        return self.q.call(self._async.retry_compensation)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"


T = TypeVar("T")


@overload
async def start_async(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Coroutine[Any, Any, T]],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> AsyncRunHandle[T]: ...


@overload
async def start_async(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., T],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> AsyncRunHandle[T]: ...


async def start_async(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Any],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> AsyncRunHandle[Any]:
    """Start a run of workflow ``fn`` with these arguments; see :func:`start`."""
    wf_queue = check_start(fn, idempotency_key, queue, delay, debounce)
    policy = check_reuse_policy(id_reuse_policy)
    level = run_priority(fn, priority)
    values = run_attributes(attributes)
    eager = check_flag("eager", eager)
    with runs_telemetry.starting(fn.name, wf_queue) as started:
        made = await create_run(
            aq,
            fn,
            args,
            kwargs,
            idempotency_key,
            wf_queue,
            delay,
            started,
            debounce=debounce,
            id_reuse_policy=policy,
            priority=level,
            attributes=values,
            eager=eager,
        )
    return made[0]


def run_attributes(attributes: object) -> dict[str, AttributeValue]:
    """A new run's search attributes, checked (None: none)."""
    return {} if attributes is None else check_attributes(attributes)


def run_priority(fn: WorkflowFunction[..., Any], priority: object) -> int:
    """A new run's priority: ``priority`` once checked, else its workflow's."""
    if priority is None:
        return fn.priority if isinstance(fn, WorkflowFunction) else 0
    return check_priority("priority", priority)


def check_start(
    fn: WorkflowFunction[..., Any],
    idempotency_key: str | None,
    queue: str | None,
    delay: float,
    debounce: Debounce | None = None,
) -> str:
    """The run's workflow queue, once the options are checked."""
    if debounce is not None and not isinstance(debounce, Debounce):
        raise InvalidArgument("debounce", f"must be a Debounce, got {type(debounce).__name__}")
    if debounce is not None and (idempotency_key is not None or delay):
        raise InvalidArgument("debounce", "cannot be combined with idempotency_key or delay")
    if not isinstance(fn, WorkflowFunction):
        raise InvalidArgument("fn", f"{fn!r} is not a @workflow function")
    if idempotency_key is not None and not idempotency_key:
        raise InvalidArgument("idempotency_key", "must not be empty")
    if delay:
        check_duration("delay", delay)
    return check_name("queue", queue or fn.queue or WORKFLOW_QUEUE)


async def create_run(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    idempotency_key: str | None,
    wf_queue: str,
    delay: float,
    started: runs_telemetry.Started,
    then: Callable[[str], Produce] | None = None,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: dict[str, AttributeValue] | None = None,
    eager: bool = False,
) -> tuple[AsyncRunHandle[Any], bool]:
    """Store a new run (unless ``idempotency_key`` names one its reuse policy
    keeps: ``id_reuse_policy``, else the workflow's), traced by ``started``,
    with ``then(run_id)``'s items in its transaction: its handle, and whether
    ``then``'s items were written (False: the run existed). With ``debounce``,
    record the call in its window (:mod:`querator.workflows.debounce`).
    ``priority``: the run's (None: the workflow's); ``attributes``: its search
    attributes, checked. ``eager``: run it here as far as this caller can
    (:mod:`querator.workflows.engine.eager`) when it has no idempotency key,
    delay, debounce nor ``then``."""
    args_text = fn.codec.encode_args(args, kwargs)
    level = fn.priority if priority is None else priority
    if debounce is not None:
        now = aq.clock.now()
        window = _meta(fn, args_text, wf_queue, now, 0.0, started, level, attributes)
        run_id = await debounced_start(aq, window, debounce)
        started.created(run_id, fn.name, existing=False)
        pending: AsyncRunHandle[Any] = AsyncRunHandle(aq, run_id, fn)
        pending.debounced = True
        return pending, True
    meta = _meta(fn, args_text, wf_queue, aq.clock.now(), delay, started, level, attributes)
    if eager and idempotency_key is None and not delay and then is None:
        return await _eager_start(aq, fn, meta, started), True
    if idempotency_key is None:
        run_id = new_run_id(None)
        # One transaction; the queues are created the first time only (a fresh
        # run id needs no lookup: its records cannot exist yet).
        items = start_items(run_id, meta, delay)
        await transact_creating(aq, [], merge_items(items, then(run_id)) if then else items)
        started.created(run_id, fn.name, existing=False)
        return AsyncRunHandle(aq, run_id, fn), True
    policy = id_reuse_policy or fn.id_reuse_policy or "use_existing"
    return await _keyed_start(aq, fn, idempotency_key, policy, meta, delay, started, then)


async def _eager_start(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Any],
    meta: RunMeta,
    started: runs_telemetry.Started,
) -> AsyncRunHandle[Any]:
    """:func:`create_run` run eagerly: stored and driven here (see
    :mod:`querator.workflows.engine.eager`); the handle knows the run's end
    when it ended here."""
    run_id = new_run_id(None)
    with using(aq.clock):
        final = await run_eagerly(aq, fn, run_id, meta)
    started.created(run_id, fn.name, existing=False)
    handle: AsyncRunHandle[Any] = AsyncRunHandle(aq, run_id, fn)
    handle.ended = final
    return handle


async def _keyed_start(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Any],
    key: str,
    policy: IdReusePolicy,
    meta: RunMeta,
    delay: float,
    started: runs_telemetry.Started,
    then: Callable[[str], Produce] | None,
) -> tuple[AsyncRunHandle[Any], bool]:
    """:func:`create_run` with idempotency key ``key`` under ``policy``."""
    latest = await latest_keyed_run(aq, key, follow=policy == "allow_duplicate_failed_only")
    generation = 0
    if latest is not None:
        if latest.meta.workflow != fn.name:
            raise IdempotencyConflict(key, latest.run_id, latest.meta.workflow, fn.name)
        if policy == "reject_duplicate":
            raise RunExists(key, latest.run_id, latest.status)
        if reuses(policy, latest):
            started.created(latest.run_id, fn.name, existing=True)
            return AsyncRunHandle(aq, latest.run_id, fn), False
        generation = latest.generation + 1
    run_id = keyed_run_id(key, generation)
    meta = meta.model_copy(update={"nonce": uuid.uuid4().hex})
    items = start_items(run_id, meta, delay)
    result = await transact_creating(
        aq,
        [],
        merge_items(items, then(run_id)) if then else items,
        lookup={RESULTS_QUEUE: [meta_key(run_id)]},
    )
    stored = RunMeta.model_validate_json(result.found[RESULTS_QUEUE][meta_key(run_id)].payload)
    if stored.nonce != meta.nonce:  # a start racing with this one created it
        if stored.workflow != fn.name:
            raise IdempotencyConflict(key, run_id, stored.workflow, fn.name)
        if policy == "reject_duplicate":
            raise RunExists(key, run_id, "running")
        started.created(run_id, fn.name, existing=True)
        return AsyncRunHandle(aq, run_id, fn), True  # ``then``'s items went in with ours
    started.created(run_id, fn.name, existing=False)
    return AsyncRunHandle(aq, run_id, fn), True


def _meta(
    fn: WorkflowFunction[..., Any],
    args_text: str,
    wf_queue: str,
    now: datetime,
    delay: float,
    started: runs_telemetry.Started,
    priority: int = 0,
    attributes: dict[str, AttributeValue] | None = None,
) -> RunMeta:
    """A new run's meta record."""
    deadline = None
    if fn.timeout is not None:
        deadline = now + timedelta(seconds=delay + fn.timeout)
    return RunMeta(
        workflow=fn.name,
        args=args_text,
        queue=wf_queue,
        started_at=now,
        deadline=deadline,
        trace=started.carrier,
        priority=priority,
        attributes=attributes or {},
    )


@overload
def start(
    q: QueueClient,
    fn: WorkflowFunction[..., Coroutine[Any, Any, T]],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> RunHandle[T]: ...


@overload
def start(
    q: QueueClient,
    fn: WorkflowFunction[..., T],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> RunHandle[T]: ...


def start(
    q: QueueClient,
    fn: WorkflowFunction[..., Any],
    /,
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    delay: float = 0.0,
    debounce: Debounce | None = None,
    id_reuse_policy: IdReusePolicy | None = None,
    priority: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    eager: bool = False,
    **kwargs: Any,
) -> RunHandle[Any]:
    """Start a run of workflow ``fn(*args, **kwargs)``; returns its handle at once.

    The handle's :meth:`~RunHandle.result` is typed as what ``fn`` returns (for
    an ``async def`` workflow, what it awaits to). The arguments are not
    type-checked against ``fn``'s parameters (the keyword options share the
    call); they are validated when encoded.

    With ``idempotency_key`` the run id is derived from the key, and starting
    again with the same key returns the existing run (its first arguments win),
    unless ``id_reuse_policy`` (default: the workflow's, else ``"use_existing"``)
    says otherwise: ``"allow_duplicate_failed_only"`` starts a new run once the
    key's run failed, was cancelled or compensated; ``"reject_duplicate"`` raises
    :class:`~querator.workflows.errors.RunExists` while a run has the key (see
    :mod:`querator.workflows.idempotency`).
    ``queue`` overrides the workflow's queue. ``delay`` (seconds) makes the
    run's first replay wait that long (a workflow ``timeout`` counts from then).
    ``priority`` (-32768 to 32767, default: the workflow's, else 0): among
    ready items, a run's of a higher priority are leased first; its steps
    inherit it unless a step sets its own (docs/flow-control.md).
    ``attributes``: the run's search attributes (names to ``str``, ``int`` or
    ``bool``; :func:`~querator.workflows.list_runs` filters on them, see
    :mod:`querator.workflows.attributes`); bad ones raise
    :class:`~querator.errors.InvalidArgument` before anything is written.
    Arguments that cannot be serialised raise
    :class:`~querator.errors.InvalidArgument` here.

    With ``debounce`` (:class:`~querator.workflows.debounce.Debounce`) the call
    joins the burst of calls with the same workflow and key: one run starts
    ``delay`` after the burst's last call with that call's arguments, and every
    call of the burst returns a handle to that one run (see docs/flow-control.md).

    With ``eager=True`` the caller runs the run's first steps itself, as a
    worker would, before returning: it stores the run with its first step's
    item leased to itself, runs that step, and goes on until the run ends (the
    handle then has its result at once) or waits for something the caller does
    not run (a timer, a message, a fan-out, a child run, a step of another
    queue, a retry), which the workers then take over. A caller that dies
    holds only leases: they expire and workers go on (docs/workflows.md, "Eager
    start"). ``eager`` is a request: a start with ``idempotency_key``,
    ``delay`` or ``debounce`` ignores it, and so does the HTTP client.
    """
    wf_queue = check_start(fn, idempotency_key, queue, delay, debounce)
    policy = check_reuse_policy(id_reuse_policy)
    level = run_priority(fn, priority)
    values = run_attributes(attributes)
    eager = check_flag("eager", eager)
    # The span is opened here, in the caller's thread, so its parent is the
    # caller's current span (the client's event loop runs in another thread).
    with runs_telemetry.starting(fn.name, wf_queue) as started:
        handle, _ = q.call(
            create_run,
            q.aio,
            fn,
            args,
            kwargs,
            idempotency_key,
            wf_queue,
            delay,
            started,
            None,
            debounce,
            policy,
            level,
            values,
            eager,
        )
    run: RunHandle[Any] = RunHandle(q, handle.run_id, fn)
    run._async.debounced = handle.debounced
    run._async.ended = handle.ended
    return run
