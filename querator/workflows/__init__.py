"""Durable workflows (built on the lease queue).

```python
from querator.workflows import step, workflow, start, Worker

@step(name="shop.charge")
def charge(order_id: str, cents: int) -> str: ...

@workflow(name="shop.checkout")
def checkout(order_id: str) -> str:
    return charge(order_id, 1999)

run = start(q, checkout, "o-1", idempotency_key="o-1")
Worker(q, [checkout, charge]).run()      # elsewhere
run.result(timeout=60)
```

See docs/workflows.md for live bodies, replay on a miss and what must be deterministic.
"""

from querator.workflows.checking import ReplayCheck, check_replay, check_replay_async
from querator.workflows.cron.api import (
    ScheduleInfo,
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    schedule,
    trigger_schedule,
)
from querator.workflows.cron.scheduler import AsyncScheduler, Scheduler
from querator.workflows.debounce import Debounce
from querator.workflows.durable import (
    agather,
    asleep,
    asleep_until,
    continue_as_new,
    continue_as_new_async,
    gather,
    gather_async,
    sleep,
    sleep_async,
    sleep_until,
    sleep_until_async,
)
from querator.workflows.engine.context import ChildHandle, StepHandle
from querator.workflows.engine.worker import AsyncWorker, Worker
from querator.workflows.errors import (
    Defer,
    IdempotencyConflict,
    NonDeterminism,
    ResultNotEncodable,
    RunExists,
    RunFinished,
    RunNotFound,
    SagaFailed,
    StepFailed,
    StepTimeout,
    WorkflowCancelled,
    WorkflowError,
    WorkflowFailed,
    WorkflowTimeout,
)
from querator.workflows.events import (
    emit_event,
    emit_event_async,
    wait_for_event,
    wait_for_event_async,
)
from querator.workflows.functions import (
    DurableFunction,
    StepFunction,
    WorkflowFunction,
    step,
    workflow,
)
from querator.workflows.idempotency import IdReusePolicy
from querator.workflows.inspection import (
    RunInfo,
    StepInfo,
    get_run,
    get_run_async,
    list_runs,
    list_runs_async,
)
from querator.workflows.messages import (
    get_event,
    get_event_async,
    recv,
    recv_async,
    send,
    send_async,
    set_event,
    set_event_async,
    signal_with_start,
    signal_with_start_async,
)
from querator.workflows.patches import deprecate_patch, patched
from querator.workflows.progress import areport_progress, report_progress, report_progress_async
from querator.workflows.rerun import fork, fork_async, resume, resume_async
from querator.workflows.retention import purge_runs, purge_runs_async
from querator.workflows.retry import RetryDecision, RetryPolicy
from querator.workflows.run_attributes import set_attributes, set_attributes_async
from querator.workflows.runs import AsyncRunHandle, RunHandle, RunStatus, start, start_async
from querator.workflows.sagas.core import SagaFunction, saga
from querator.workflows.step_context import StepContext, current_step
from querator.workflows.stored import ParentClosePolicy
from querator.workflows.streams import (
    StreamPage,
    close_stream,
    close_stream_async,
    read_stream,
    read_stream_async,
    read_stream_page_async,
    write_stream,
    write_stream_async,
)

__all__ = [
    "AsyncRunHandle",
    "AsyncScheduler",
    "AsyncWorker",
    "ChildHandle",
    "Debounce",
    "Defer",
    "DurableFunction",
    "IdReusePolicy",
    "IdempotencyConflict",
    "NonDeterminism",
    "ParentClosePolicy",
    "ReplayCheck",
    "ResultNotEncodable",
    "RetryDecision",
    "RetryPolicy",
    "RunExists",
    "RunFinished",
    "RunHandle",
    "RunInfo",
    "RunNotFound",
    "RunStatus",
    "SagaFailed",
    "SagaFunction",
    "ScheduleInfo",
    "Scheduler",
    "StepContext",
    "StepFailed",
    "StepFunction",
    "StepHandle",
    "StepInfo",
    "StepTimeout",
    "StreamPage",
    "Worker",
    "WorkflowCancelled",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowFunction",
    "WorkflowTimeout",
    "agather",
    "areport_progress",
    "asleep",
    "asleep_until",
    "check_replay",
    "check_replay_async",
    "close_stream",
    "close_stream_async",
    "continue_as_new",
    "continue_as_new_async",
    "current_step",
    "delete_schedule",
    "deprecate_patch",
    "emit_event",
    "emit_event_async",
    "fork",
    "fork_async",
    "gather",
    "gather_async",
    "get_event",
    "get_event_async",
    "get_run",
    "get_run_async",
    "get_schedule",
    "list_runs",
    "list_runs_async",
    "list_schedules",
    "patched",
    "pause_schedule",
    "purge_runs",
    "purge_runs_async",
    "read_stream",
    "read_stream_async",
    "read_stream_page_async",
    "recv",
    "recv_async",
    "report_progress",
    "report_progress_async",
    "resume",
    "resume_async",
    "resume_schedule",
    "saga",
    "schedule",
    "send",
    "send_async",
    "set_attributes",
    "set_attributes_async",
    "set_event",
    "set_event_async",
    "signal_with_start",
    "signal_with_start_async",
    "sleep",
    "sleep_async",
    "sleep_until",
    "sleep_until_async",
    "start",
    "start_async",
    "step",
    "trigger_schedule",
    "wait_for_event",
    "wait_for_event_async",
    "workflow",
    "write_stream",
    "write_stream_async",
]
