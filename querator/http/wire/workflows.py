"""Bodies of the workflow, schedule and dead-letter endpoints (querator's own).

Answers reuse the library's models (``RunInfo``, ``ScheduleInfo``): the wire
shape is the domain shape.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, StrictInt

from querator.http.wire.items import StorageItem
from querator.http.wire.types import Duration, Instant, QueueName, RequestTimeout, WireModel
from querator.queue.dead_reasons import source_queue
from querator.queue.models import StoredItem
from querator.workflows.cron.api import ScheduleInfo
from querator.workflows.idempotency import IdReusePolicy
from querator.workflows.inspection import RunInfo
from querator.workflows.stored import RunStatus


class Signal(WireModel):
    """A message to put in a run's mailbox as it starts (``signal_with_start``)."""

    topic: str
    value: Any = None
    """Anything JSON can hold."""


class StartRequest(WireModel):
    """``/v1/workflows.start``: a run of a workflow the server knows (``--app``)."""

    workflow: str
    """The workflow's persisted name."""
    args: list[Any] = Field(default_factory=list)
    """Positional arguments (JSON values)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments (JSON values)."""
    idempotency_key: str | None = None
    """Starting twice with one key starts one run (and answers its id)."""
    queue: str | None = None
    """The run's workflow queue (default: the workflow's)."""
    delay: Duration | None = None
    """Start the run after this long."""
    id_reuse_policy: IdReusePolicy | None = None
    """What a start with an idempotency key does when a run has the key
    (default: the workflow's, else ``use_existing``)."""
    signal: Signal | None = None
    """Start with this message already in the run's mailbox, in one transaction
    (``signal_with_start``; a run the idempotency key names gets it sent
    instead). Not with ``delay``, ``id_reuse_policy`` or ``priority``."""
    priority: StrictInt | None = None
    """The run's priority, -32768 to 32767 (default: the workflow's, else 0)."""
    attributes: dict[str, Any] | None = None
    """The run's search attributes: names to strings, integers or booleans
    (``list_runs`` filters on them)."""


class RunReply(WireModel):
    """The id of a run."""

    run_id: str


class RunRequest(WireModel):
    """A call naming one run."""

    run_id: str


class CancelRequest(WireModel):
    """``/v1/runs.cancel``."""

    run_id: str
    reason: str = ""


class DoneReply(WireModel):
    """Whether the call changed anything (False: the run had already ended, or
    was not compensation_failed)."""

    changed: bool


class PurgeRunsRequest(WireModel):
    """``/v1/runs.purge``: delete finished runs that ended before ``before``."""

    before: Instant
    status: list[RunStatus] | None = None
    """Only runs that ended so (finished statuses; absent: every finished one)."""
    workflow: str | None = None
    """Only runs of this workflow."""
    limit: int = Field(default=1000, ge=1, le=100_000)
    """Purge at most this many (call again while the count is ``limit``)."""


class ListRunsRequest(WireModel):
    """``/v1/runs.list``: runs newest first, filtered, paged by ``after``."""

    status: RunStatus | None = None
    workflow: str | None = None
    since: datetime | None = None
    """Only runs started at or after this instant (RFC 3339)."""
    after: str | None = None
    """The last run id of the previous page."""
    limit: int = 100
    attributes: dict[str, Any] | None = None
    """Only runs holding every one of these search attributes (equal values)."""


class ListRunsReply(WireModel):
    """A page of runs (without their steps)."""

    runs: list[RunInfo]


class ResultRequest(WireModel):
    """``/v1/runs.result``: wait up to ``request_timeout`` for the run to end (454 if not)."""

    run_id: str
    request_timeout: RequestTimeout = Field(default=0.0, validate_default=True)


class ResultReply(WireModel):
    """How the run ended."""

    run_id: str
    status: str
    """``completed``, ``failed``, ``cancelled``, or a saga's ``compensated`` or
    ``compensation_failed``."""
    result: Any = None
    """The result (JSON), when completed."""
    error_type: str | None = None
    error_message: str | None = None
    saga: bool = False
    """True when the run is a saga that did not complete (the library raises
    ``SagaFailed`` for it)."""
    compensations: list[str] = Field(default_factory=list)
    """A saga's compensations that ran, in order (``"name@position"``; see
    ``SagaFailed.compensations``)."""


class ScheduleRequest(WireModel):
    """``/v1/schedules.create``: create or redefine a cron schedule."""

    name: str
    workflow: str
    cron: str
    tz: str = "UTC"
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    catchup: str = "skip"
    catchup_window: Duration = 86_400.0
    overlap: str = "skip"
    jitter: Duration = 0.0
    queue: str | None = None
    start_at: Instant | None = None


class ScheduleNameRequest(WireModel):
    """A call naming one schedule."""

    name: str


class PauseRequest(WireModel):
    """``/v1/schedules.pause``."""

    name: str
    note: str = ""


class SchedulesReply(WireModel):
    """Every schedule."""

    schedules: list[ScheduleInfo]


class DeadListRequest(WireModel):
    """``/v1/dead.list``: the dead letters of a queue (its dead queue's items)."""

    queue_name: QueueName
    limit: int | None = Field(default=100, ge=1, le=1_000_000)
    """At most this many (the oldest first); null: every dead letter."""


class DeadRequeueRequest(WireModel):
    """``/v1/dead.requeue``: send dead letters back (``ids``, or all when absent)."""

    queue_name: QueueName
    ids: list[str] | None = None


class ForkRequest(WireModel):
    """``/v1/runs.fork``: a new run of a run's workflow and arguments."""

    run_id: str
    from_step: int = 0
    """Steps before this position keep the old run's results (0: start afresh)."""


class DeadShowRequest(WireModel):
    """``/v1/dead.show``: one dead letter of a queue."""

    queue_name: QueueName
    id: str


class DeadPurgeRequest(WireModel):
    """``/v1/dead.purge``: delete dead letters for good (``ids``, or all when absent)."""

    queue_name: QueueName
    ids: list[str] | None = None


class DeadLetter(StorageItem):
    """A dead letter: a stored item and the queue it was dead-lettered from."""

    source_queue: str | None = None
    """The name of the queue it came from (several queues may share a dead
    queue); null for a letter written before querator recorded it."""

    @classmethod
    def of(cls, item: StoredItem, now: datetime | None = None) -> DeadLetter:
        """The wire form of a dead letter."""
        wire = StorageItem.of(item, now)
        fields = {name: getattr(wire, name) for name in StorageItem.model_fields}
        return cls.model_construct(**fields, source_queue=source_queue(item.headers))


class DeadListReply(WireModel):
    """Dead letters in arrival order."""

    items: list[DeadLetter]


class CountReply(WireModel):
    """How many items the call moved."""

    count: int
