"""Handlers of the workflow, schedule and dead-letter endpoints: each calls
the function the library and the CLI call (inspection, runs, cron api,
dead_letters)."""

from __future__ import annotations

from typing import Any

from querator.errors import InvalidArgument
from querator.http.wire.queue import Empty, Reply
from querator.http.wire.workflows import (
    CancelRequest,
    CountReply,
    DeadLetter,
    DeadListReply,
    DeadListRequest,
    DeadPurgeRequest,
    DeadRequeueRequest,
    DeadShowRequest,
    DoneReply,
    ForkRequest,
    ListRunsReply,
    ListRunsRequest,
    PauseRequest,
    PurgeRunsRequest,
    ResultReply,
    ResultRequest,
    RunReply,
    RunRequest,
    ScheduleNameRequest,
    ScheduleRequest,
    SchedulesReply,
    StartRequest,
)
from querator.queue.dead_letters import (
    dead_letter_async,
    dead_letters_async,
    purge_async,
    requeue_async,
)
from querator.workflows.checking import ReplayCheck, check_replay_async
from querator.workflows.cron.api import (
    delete_schedule_async,
    list_schedules_async,
    pause_schedule_async,
    resume_schedule_async,
    schedule_async,
    trigger_schedule_async,
)
from querator.workflows.errors import SagaFailed, WorkflowCancelled, WorkflowFailed
from querator.workflows.functions import WorkflowFunction
from querator.workflows.inspection import RunInfo, get_run_async, list_runs_async
from querator.workflows.messages import signal_with_start_async
from querator.workflows.reindex import reindex_runs_async
from querator.workflows.rerun import fork_async, resume_async
from querator.workflows.retention import purge_runs_async
from querator.workflows.runs import AsyncRunHandle, start_async


def _workflow(state: Any, name: str) -> WorkflowFunction[..., Any]:
    found = state.functions.get(name)
    if not isinstance(found, WorkflowFunction):
        known = ", ".join(
            sorted(n for n, f in state.functions.items() if isinstance(f, WorkflowFunction))
        )
        raise InvalidArgument(
            "workflow",
            f"no workflow named {name!r} here (known: {known or 'none: serve with --app'})",
        )
    return found


async def start(state: Any, body: StartRequest) -> RunReply:
    """Start a run of a workflow by name (with a message in its mailbox: ``signal``)."""
    if body.signal is not None:
        if (
            body.delay
            or body.id_reuse_policy is not None
            or body.priority is not None
            or body.attributes is not None
        ):
            raise InvalidArgument(
                "signal", "cannot be combined with delay, id_reuse_policy, priority or attributes"
            )
        signaled = await signal_with_start_async(
            state.aq,
            _workflow(state, body.workflow),
            *body.args,
            signal=(body.signal.topic, body.signal.value),
            idempotency_key=body.idempotency_key,
            queue=body.queue,
            **body.kwargs,
        )
        return RunReply(run_id=signaled.run_id)
    handle = await start_async(
        state.aq,
        _workflow(state, body.workflow),
        *body.args,
        idempotency_key=body.idempotency_key,
        queue=body.queue,
        delay=body.delay or 0.0,
        id_reuse_policy=body.id_reuse_policy,
        priority=body.priority,
        attributes=body.attributes,
        **body.kwargs,
    )
    return RunReply(run_id=handle.run_id)


async def get_run(state: Any, body: RunRequest) -> RunInfo:
    """A run with its ended steps."""
    return await get_run_async(state.aq, body.run_id)


async def list_runs(state: Any, body: ListRunsRequest) -> ListRunsReply:
    """Runs newest first, filtered by status, workflow and start time, paged."""
    runs = await list_runs_async(
        state.aq,
        status=body.status,
        workflow=body.workflow,
        since=body.since,
        after=body.after,
        limit=body.limit,
        attributes=body.attributes,
    )
    return ListRunsReply(runs=runs)


async def purge_runs(state: Any, body: PurgeRunsRequest) -> CountReply:
    """Delete finished runs that ended before ``before`` (how many)."""
    count = await purge_runs_async(
        state.aq, before=body.before, status=body.status, workflow=body.workflow, limit=body.limit
    )
    return CountReply(count=count)


async def cancel(state: Any, body: CancelRequest) -> DoneReply:
    """Ask a run to end as cancelled."""
    return DoneReply(changed=await AsyncRunHandle(state.aq, body.run_id).cancel(body.reason))


async def retry_compensation(state: Any, body: RunRequest) -> DoneReply:
    """Run a compensation_failed saga's failed compensation again."""
    return DoneReply(changed=await AsyncRunHandle(state.aq, body.run_id).retry_compensation())


async def result(state: Any, body: ResultRequest) -> ResultReply:
    """Wait for the run to end (a long poll: 454 when it has not ended in time)."""
    handle: AsyncRunHandle[Any] = AsyncRunHandle(state.aq, body.run_id)
    try:
        value = await state.unless_stopping(lambda: handle.result(timeout=body.request_timeout))
    except SagaFailed as exc:
        return ResultReply(run_id=body.run_id, status=exc.status, error_type=exc.error_type,
                           error_message=exc.message, saga=True,
                           compensations=list(exc.compensations))  # fmt: skip
    except WorkflowFailed as exc:
        return ResultReply(run_id=body.run_id, status="failed", error_type=exc.error_type,
                           error_message=exc.message)  # fmt: skip
    except WorkflowCancelled as exc:
        return ResultReply(run_id=body.run_id, status="cancelled",
                           error_type="WorkflowCancelled", error_message=exc.reason)  # fmt: skip
    return ResultReply(run_id=body.run_id, status="completed", result=value)


async def schedules(state: Any, body: Empty) -> SchedulesReply:
    """Every schedule with its next fire time and last run."""
    return SchedulesReply(schedules=await list_schedules_async(state.aq))


async def create_schedule(state: Any, body: ScheduleRequest) -> Reply:
    """Create or redefine a schedule of a workflow the server knows."""
    await schedule_async(
        state.aq,
        body.name,
        _workflow(state, body.workflow),
        cron=body.cron,
        tz=body.tz,
        args=tuple(body.args),
        kwargs=body.kwargs,
        catchup=body.catchup,
        catchup_window=body.catchup_window,
        overlap=body.overlap,
        jitter=body.jitter,
        queue=body.queue,
        start_at=body.start_at,
    )
    return Reply()


async def pause(state: Any, body: PauseRequest) -> Reply:
    """Pause a schedule."""
    await pause_schedule_async(state.aq, body.name, body.note)
    return Reply()


async def resume(state: Any, body: ScheduleNameRequest) -> Reply:
    """Resume a paused schedule."""
    await resume_schedule_async(state.aq, body.name)
    return Reply()


async def delete_schedule(state: Any, body: ScheduleNameRequest) -> DoneReply:
    """Delete a schedule."""
    return DoneReply(changed=await delete_schedule_async(state.aq, body.name))


async def trigger(state: Any, body: ScheduleNameRequest) -> RunReply:
    """Start a run of a schedule now."""
    return RunReply(run_id=(await trigger_schedule_async(state.aq, body.name)).run_id)


async def dead_list(state: Any, body: DeadListRequest) -> DeadListReply:
    """The dead letters of a queue."""
    found = await dead_letters_async(state.aq, body.queue_name, body.limit)
    return DeadListReply(items=[DeadLetter.of(item) for item in found])


async def dead_requeue(state: Any, body: DeadRequeueRequest) -> CountReply:
    """Send dead letters back to their queue."""
    return CountReply(count=await requeue_async(state.aq, body.queue_name, body.ids))


async def dead_show(state: Any, body: DeadShowRequest) -> DeadLetter:
    """One dead letter of a queue, in full."""
    return DeadLetter.of(await dead_letter_async(state.aq, body.queue_name, body.id))


async def dead_purge(state: Any, body: DeadPurgeRequest) -> CountReply:
    """Delete dead letters for good."""
    return CountReply(count=await purge_async(state.aq, body.queue_name, body.ids))


async def resume_run(state: Any, body: RunRequest) -> DoneReply:
    """Resume a failed or cancelled run from its failed step (``changed``
    false: the run is running or completed)."""
    return DoneReply(changed=await resume_async(state.aq, body.run_id))


async def fork_run(state: Any, body: ForkRequest) -> RunReply:
    """Start a new run of a run's workflow and arguments, keeping the results
    of the steps before ``from_step``."""
    return RunReply(run_id=(await fork_async(state.aq, body.run_id, body.from_step)).run_id)


async def reindex_runs(state: Any, body: Empty) -> CountReply:
    """Write the run-index entries of runs stored without them (how many runs
    were seen); ``querator runs reindex``."""
    return CountReply(count=await reindex_runs_async(state.aq))


async def check_replay(state: Any, body: RunRequest) -> ReplayCheck:
    """Replay a stored run with the server's workflow code (``--app``),
    dispatching nothing: does the code still make the calls its history holds?"""
    functions = list(state.functions.values())
    if not any(isinstance(fn, WorkflowFunction) for fn in functions):
        raise InvalidArgument(
            "app",
            "this server has no workflow code to replay with: serve with --app MODULE",
        )
    try:
        return await check_replay_async(state.aq, body.run_id, functions)
    except InvalidArgument as exc:
        if exc.field != "functions":
            raise
        raise InvalidArgument("run_id", f"{exc.rule} (not in this server's --app)") from None
