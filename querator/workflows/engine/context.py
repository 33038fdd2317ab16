"""What a call inside a workflow body sees: the run's context. Pure, no I/O.

Each call at a position (a step, a timer, a gather, a child workflow) returns
its stored outcome when the run's history holds one (on a replay), and
otherwise *parks* the body (:func:`querator.workflows.engine.fiber.park`) with
a request saying what it waits for; the engine commits what the request needs
(a step item, a timer, a child run) and resumes the body once the outcome is
there. A live body therefore runs once, from its first call to its end,
however many steps it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from querator.clock import SYSTEM, Clock
from querator.queue.models import Item
from querator.workflows.attributes import AttributesRecord, AttributeValue, merged, snapshot_key
from querator.workflows.codec import Codec
from querator.workflows.engine.child_requests import (
    Child,
    ChildSpec,
    Member,
    child_items,
    child_request,
    member_position,
)
from querator.workflows.engine.event_waits import EventWaiter, confirm_tag, waiter_item
from querator.workflows.engine.fiber import Evicted, park
from querator.workflows.engine.patching import first_reached, marker, marker_name
from querator.workflows.errors import NonDeterminism, StepFailed
from querator.workflows.keys import (
    RECV_STEP,
    RESULTS_QUEUE,
    SET_ATTRIBUTES_STEP,
    SET_EVENT_STEP,
    SLEEP_STEP,
    WAIT_EVENT_STEP,
    WRITE_STREAM_STEP,
    event_key,
    step_key,
    stream_key,
    wait_key,
)
from querator.workflows.stored import (
    ParentLink,
    StepPayload,
    StepRecord,
    WaitRecord,
    attribute_items,
    record_item,
    step_item,
    wake_item,
)

__all__ = [
    "CURRENT",
    "Called",
    "Child",
    "ChildHandle",
    "ChildSpec",
    "Gather",
    "Load",
    "Recv",
    "Request",
    "RunContext",
    "Sleep",
    "StepCall",
    "StepHandle",
    "Undo",
    "WaitEvent",
    "member_position",
    "started_children",
    "starts_runs",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Undo:
    """How to compensate a step (in a saga): its compensation and how to build its arguments."""

    name: str
    """The compensation's persisted name."""
    queue: str | None
    on_failure: bool
    """Compensate the step even when it failed (its result is then None)."""
    encode: Callable[[tuple[Any, ...], dict[str, Any], str | None], str]
    """(step args, step kwargs, stored result text or None) -> the compensation's args text."""


@dataclass(frozen=True)
class Called:
    """A step call with a compensation, as the body made it."""

    step: str
    undo: Undo
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class StepHandle(Generic[T]):
    """A step started with ``.spawn(...)``; pass it to ``gather`` for its result.

    Inside a workflow body it names the step's position; outside one it holds
    the value the step returned when it ran inline.
    """

    name: str
    position: int
    codec: Codec
    dispatch: Member | None = None
    """(queue, payload) of the step item, or the child run to start (inside a
    workflow body)."""
    value: Any = None
    """The result, when the step ran inline (outside a workflow body)."""


@dataclass(frozen=True)
class ChildHandle(StepHandle[T]):
    """A child workflow started with ``.spawn(...)``; ``gather`` takes it beside
    step handles and returns the child's result (a failed child raises
    :class:`StepFailed`, as a failed step does)."""

    run_id: str = ""
    """The child run's id (empty outside a workflow body, where the child ran inline)."""


# -- what a parked body waits for ------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepCall:
    """Run step ``payload`` (its item goes to ``queue``) and resume with its record."""

    queue: str
    payload: StepPayload

    @property
    def position(self) -> int:
        return self.payload.position


@dataclass(frozen=True, slots=True)
class Gather:
    """Resume once every member has a record; ``dispatch``: produce their items
    (step items, child runs) now (only while none has a record: they are
    dispatched together, once)."""

    members: tuple[Member, ...]
    dispatch: bool


@dataclass(frozen=True, slots=True)
class Sleep:
    """A durable timer at ``position``: resume at ``until``; ``new``: store its record;
    ``since``: when it began (its span's start)."""

    position: int
    until: datetime
    new: bool
    since: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Recv:
    """Read the oldest unread message on ``topic`` into the record at ``position``;
    at ``until`` (None: never) record a timeout instead."""

    position: int
    topic: str
    until: datetime | None


def started_children(request: Request | None) -> list[Child]:
    """The child runs committing ``request`` starts."""
    if isinstance(request, Gather) and request.dispatch:
        return [m for m in request.members if isinstance(m, Child)]
    return [request] if isinstance(request, Child) else []


@dataclass(frozen=True, slots=True)
class WaitEvent:
    """Read the event emitted under ``name`` into the record at ``position``; at
    ``until`` (None: never) record a timeout instead. ``confirm``: the park also
    commits a wake that looks for the event once the waiter record is committed
    (see :mod:`.event_waits`)."""

    position: int
    name: str
    until: datetime | None
    confirm: bool = field(default=True, compare=False)


def starts_runs(request: Request | None) -> bool:
    """Whether committing ``request`` starts child runs."""
    return bool(started_children(request))


@dataclass(frozen=True, slots=True)
class Load:
    """The body reached ``position``, past the records loaded: load more (no commit)."""

    position: int


Request = StepCall | Gather | Sleep | Child | Recv | WaitEvent
"""What a parked body waits for (a :class:`Load` is answered at once)."""


def waited_positions(request: Request) -> list[int]:
    """The positions whose records resume a body parked on ``request`` (none for a timer)."""
    if isinstance(request, StepCall):
        return [request.position]
    if isinstance(request, Gather):
        return [member_position(member) for member in request.members]
    if isinstance(request, Child | Recv | WaitEvent):
        return [request.position]
    return []


def awaited_steps(request: Request | None) -> list[tuple[str, int]]:
    """(queue, position) of the step items a body parked on ``request`` waits for."""
    if isinstance(request, StepCall):
        return [(request.queue, request.position)]
    if isinstance(request, Gather):
        return [(m[0], m[1].position) for m in request.members if not isinstance(m, Child)]
    return []


def request_items(
    run_id: str, ctx: RunContext, request: Request, trace: Mapping[str, str] | None = None
) -> dict[str, list[Item]]:
    """What committing ``request`` of the run ``ctx`` produces (items per queue;
    ``trace``: the run's trace context, for their headers)."""
    produce: dict[str, list[Item]] = {}
    if isinstance(request, StepCall):
        produce[request.queue] = [step_item(request.payload, trace=trace)]
    elif isinstance(request, Gather):
        produce = _gather_items(run_id, request, trace)
    elif isinstance(request, Sleep):
        if request.new:
            stored = StepRecord(step=SLEEP_STEP, ok=True, result="null", until=request.until)
            key = step_key(run_id, request.position)
            produce[RESULTS_QUEUE] = [record_item(key, stored, run_id)]
        # Produced again on a replay only to survive a wake that came early
        # (another wake, or clocks that disagree): dedup keeps one.
        tag = str(request.position)
        wake = wake_item(run_id, tag, request.until, trace=trace, workflow=ctx.workflow)
        produce[ctx.workflow_queue] = [wake]
    elif isinstance(request, Recv):
        # The timeout's wake (a send produces a wake of its own). Produced again
        # on a replay: dedup keeps the first, so the timeout counts from the
        # first time the body reached the call.
        if request.until is not None:
            tag = str(request.position)
            wake = wake_item(run_id, tag, request.until, trace=trace, workflow=ctx.workflow)
            produce[ctx.workflow_queue] = [wake]
    elif isinstance(request, WaitEvent):
        produce = _wait_items(run_id, ctx, request, trace)
    else:
        produce = child_items(run_id, request)
    if isinstance(request, Recv | WaitEvent | Child):
        wait = _wait_record(request).model_copy(update={"since": ctx.clock.now()})
        item = record_item(wait_key(run_id, request.position), wait, run_id)
        produce[RESULTS_QUEUE] = [*produce.get(RESULTS_QUEUE, []), item]
    return produce


def _gather_items(
    run_id: str, request: Gather, trace: Mapping[str, str] | None
) -> dict[str, list[Item]]:
    """What dispatching a gather produces: its step items and its children's starts."""
    produce: dict[str, list[Item]] = {}
    if request.dispatch:
        for member in request.members:
            if isinstance(member, Child):
                for queue, items in child_items(run_id, member).items():
                    produce.setdefault(queue, []).extend(items)
            else:
                queue, payload = member
                produce.setdefault(queue, []).append(step_item(payload, trace=trace))
    return produce


def _wait_record(request: Recv | WaitEvent | Child) -> WaitRecord:
    """What ``get_run`` shows a body parked on ``request`` waits for (a step
    call's items, and a timer's record, say it themselves)."""
    if isinstance(request, Recv):
        return WaitRecord(kind="message", name=request.topic, until=request.until)
    if isinstance(request, WaitEvent):
        return WaitRecord(kind="event", name=request.name, until=request.until)
    return WaitRecord(kind="child", name=request.run_id, until=request.meta.deadline)


def _wait_items(
    run_id: str, ctx: RunContext, request: WaitEvent, trace: Mapping[str, str] | None
) -> dict[str, list[Item]]:
    """A wait's waiter record (produced again on every park: dedup keeps one),
    its confirming wake and its timeout's wake (see :class:`WaitEvent`)."""
    waiter = EventWaiter(
        run_id=run_id,
        position=request.position,
        queue=ctx.workflow_queue,
        workflow=ctx.workflow,
        trace=dict(trace or {}),
    )
    wakes = []
    if request.confirm:
        tag = confirm_tag(request.position)
        wakes.append(wake_item(run_id, tag, trace=trace, workflow=ctx.workflow))
    if request.until is not None:
        tag = str(request.position)
        wakes.append(wake_item(run_id, tag, request.until, trace=trace, workflow=ctx.workflow))
    produce = {RESULTS_QUEUE: [waiter_item(request.name, waiter)]}
    if wakes:
        produce[ctx.workflow_queue] = wakes
    return produce


# -- the context -----------------------------------------------------------------


@dataclass
class RunContext:
    """One run as its body sees it: the records known so far, the next position.

    The engine adds records (:meth:`add`) before it resumes a body parked on
    them; a record added is committed, or about to be in the transaction the
    body's next request goes into (if that fails, the body is torn down).
    """

    run_id: str
    workflow_queue: str
    records: dict[int, StepRecord]
    created: dict[int, datetime] = field(default_factory=dict)
    """When each record was stored, where known (sagas compensate in reverse of this)."""
    known: int = 1 << 62
    """Positions below this were looked up; reaching past it loads more."""
    position: int = 0
    """The next call's position."""
    compensable: dict[int, Called] = field(default_factory=dict)
    """Step calls met so far that declare a compensation, by position."""
    fatal: NonDeterminism | None = None
    """Set when the body diverged from the stored history."""
    trace: dict[str, str] = field(default_factory=dict)
    """The run's trace context (:attr:`RunMeta.trace`): its child runs share it."""
    closed: bool = False
    """Set when the body is torn down: every call raises :class:`Evicted`."""
    clock: Clock = SYSTEM
    """The client's clock: durable timers and child deadlines count from it."""
    workflow: str = ""
    """The run's workflow (the kind of its wake tasks)."""
    priority: int = 0
    """The run's priority (:attr:`RunMeta.priority`): its steps' unless one sets its own."""
    published: list[Item] = field(default_factory=list)
    """Records a ``set_event`` added, not committed yet: the engine takes them
    (:meth:`take_published`) into the commit of the body's next move."""
    patches: dict[str, bool] = field(default_factory=dict)
    """What ``patched`` answered, by patch name (the first answer holds)."""
    attributes: AttributesRecord = field(default_factory=lambda: AttributesRecord(gen=0))
    """The run's search attributes as the body has set them so far."""
    started_at: datetime | None = None
    """The run's start time (its index entries' stamp)."""

    def add(self, position: int, record: StepRecord, created: datetime | None = None) -> None:
        """Record the outcome at ``position`` (before resuming the body)."""
        self.records[position] = record
        self.created[position] = created if created is not None else record.finished_at

    def _check(self) -> None:
        if self.closed:
            raise Evicted()
        if self.fatal is not None:
            raise self.fatal

    def _next(self, markers: bool = False) -> int:
        """The next position, loading records up to it; a patch marker's
        position is skipped unless ``markers`` (see :mod:`.patching`)."""
        self._check()
        while True:
            position = self.position
            self.position += 1
            while position >= self.known:
                park(Load(position))
                self._check()
            if markers or marker_name(self.records.get(position)) is None:
                return position

    def patched(self, name: str) -> bool:
        """Whether the run takes the new branch of patch ``name`` (see :mod:`.patching`)."""
        if name in self.patches:
            self._check()
            return self.patches[name]
        position = self._next(markers=True)
        record = self.records.get(position)
        if record is None and first_reached(self.records, position):
            self.add(position, marker(name))
            key = step_key(self.run_id, position)
            self.published.append(record_item(key, self.records[position], self.run_id))
            taken = True
        else:
            taken = marker_name(record) == name
            if not taken:
                self.position = position  # the run predates the patch: the old calls go on here
        self.patches[name] = taken
        return taken

    def deprecate_patch(self, name: str) -> None:
        """Step over the marker of patch ``name`` where a run stored one."""
        position = self._next(markers=True)
        if marker_name(self.records.get(position)) != name:
            self.position = position

    def _stored(self, position: int, name: str) -> StepRecord | None:
        record = self.records.get(position)
        if record is not None and record.step != name:
            self.fatal = NonDeterminism(position, record.step, name)
            raise self.fatal
        return record

    def _wait(self, positions: Sequence[int], request: Request) -> None:
        """Park on ``request`` until every position has a record."""
        while any(p not in self.records for p in positions):
            park(request)
            self._check()

    def _note(
        self,
        position: int,
        name: str,
        undo: Undo | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        if undo is not None:
            self.compensable[position] = Called(name, undo, args, kwargs)

    @staticmethod
    def _outcome(record: StepRecord, position: int, codec: Codec) -> Any:
        if not record.ok:
            error = record.error
            raise StepFailed(
                record.step,
                position,
                error.type if error else "Exception",
                error.message if error else "",
            )
        assert record.result is not None
        return codec.decode_result(record.result)

    def _payload(
        self,
        name: str,
        position: int,
        codec: Codec,
        args: tuple[Any, ...],
        kw: dict[str, Any],
        priority: int | None,
    ) -> StepPayload:
        return StepPayload(
            run_id=self.run_id,
            position=position,
            step=name,
            args=codec.encode_args(args, kw),
            workflow_queue=self.workflow_queue,
            workflow=self.workflow,
            priority=self.priority if priority is None else priority,
            run_priority=self.priority,
        )

    def call(
        self,
        name: str,
        queue: str | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        priority: int | None = None,
    ) -> Any:
        """A step call at the next position: its stored outcome, once there is one
        (``priority``: the step's, None for the run's)."""
        position = self._next()
        record = self._stored(position, name)
        self._note(position, name, undo, args, kwargs)
        if record is None:
            payload = self._payload(name, position, codec, args, kwargs, priority)
            self._wait([position], StepCall(queue or self.workflow_queue, payload))
            record = self.records[position]
        return self._outcome(record, position, codec)

    def spawn(
        self,
        name: str,
        queue: str | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
        priority: int | None = None,
    ) -> StepHandle[Any]:
        """Take the next position for a step that ``gather`` will dispatch and await."""
        position = self._next()
        self._stored(position, name)
        self._note(position, name, undo, args, kwargs)
        payload = self._payload(name, position, codec, args, kwargs, priority)
        return StepHandle(name, position, codec, (queue or self.workflow_queue, payload))

    def gather(self, handles: Sequence[StepHandle[Any]]) -> list[Any]:
        """All results in order, once every member ended.

        A failed member raises its :class:`StepFailed` once every member ended.
        """
        self._check()
        missing = [h for h in handles if h.position not in self.records]
        if missing:
            members: list[Member] = []
            for handle in handles:
                assert handle.dispatch is not None
                members.append(handle.dispatch)
            # Members are dispatched together: once any has a record, all were
            # dispatched, and a deferred one must not be dispatched twice.
            dispatch = len(missing) == len(handles)
            self._wait([h.position for h in handles], Gather(tuple(members), dispatch))
        return [self._outcome(self.records[h.position], h.position, h.codec) for h in handles]

    def sleep_until(self, until: datetime) -> None:
        """A durable timer at the next position; ``until`` is stored the first time."""
        position = self._next()
        record = self._stored(position, SLEEP_STEP)
        if record is None:
            park(Sleep(position, until, new=True, since=self.clock.now()))
        elif record.until is not None and self.clock.now() < record.until:
            park(Sleep(position, record.until, new=False, since=record.finished_at))
        self._check()

    def sleep(self, seconds: float) -> None:
        """:meth:`sleep_until` ``now + seconds`` (computed the first time only)."""
        self.sleep_until(self.clock.now() + timedelta(seconds=seconds))

    def recv(self, topic: str, timeout: float | None) -> StepRecord:
        """The record of a ``recv`` at the next position (the message read, or
        the timeout), once there is one."""
        position = self._next()
        record = self._stored(position, RECV_STEP)
        if record is None:
            until = None
            if timeout is not None:
                until = self.clock.now() + timedelta(seconds=timeout)
            self._wait([position], Recv(position, topic, until))
            record = self.records[position]
        return record

    def wait_for_event(self, name: str, timeout: float | None) -> StepRecord:
        """The record of a ``wait_for_event`` at the next position (the event
        seen, or the timeout), once there is one."""
        position = self._next()
        record = self._stored(position, WAIT_EVENT_STEP)
        if record is None:
            until = None
            if timeout is not None:
                until = self.clock.now() + timedelta(seconds=timeout)
            self._wait([position], WaitEvent(position, name, until))
            record = self.records[position]
        return record

    def set_event(self, key: str, text: str) -> None:
        """Publish ``text`` (JSON) under ``key`` at the next position: stored with
        the body's next commit, once (a replay finds the record)."""
        position = self._next()
        if self._stored(position, SET_EVENT_STEP) is not None:
            return
        record = StepRecord(step=SET_EVENT_STEP, ok=True, result=text, attempts=1)
        self.add(position, record)
        self.published.append(record_item(step_key(self.run_id, position), record, self.run_id))
        event = record_item(event_key(self.run_id, key, position), record, self.run_id)
        self.published.append(event)

    def set_attributes(self, changes: Mapping[str, AttributeValue]) -> None:
        """Change the run's search attributes at the next position: the record
        (the snapshot after the change; no result when nothing changed), the
        snapshot and the index entries of the values changed are stored with
        the body's next commit, once (a replay finds the record). Too many
        attributes raise before a position is taken (so in a replay too)."""
        snapshot = merged(self.attributes, changes)
        position = self._next()
        record = self._stored(position, SET_ATTRIBUTES_STEP)
        if record is not None:
            if record.result is not None:
                self.attributes = AttributesRecord.model_validate_json(record.result)
            return
        text = None if snapshot is None else snapshot.model_dump_json()
        record = StepRecord(step=SET_ATTRIBUTES_STEP, ok=True, result=text, attempts=1)
        self.add(position, record)
        self.published.append(record_item(step_key(self.run_id, position), record, self.run_id))
        if snapshot is None:
            return
        self.attributes = snapshot
        key = snapshot_key(self.run_id, snapshot.gen)
        self.published.append(record_item(key, snapshot, self.run_id))
        assert self.started_at is not None
        self.published += attribute_items(self.run_id, self.workflow, self.started_at, snapshot)

    def write_stream(self, key: str, text: str | None) -> None:
        """Append ``text`` (JSON) to stream ``key`` at the next position (None:
        close the stream): stored with the body's next commit, once."""
        position = self._next()
        if self._stored(position, WRITE_STREAM_STEP) is not None:
            return
        record = StepRecord(step=WRITE_STREAM_STEP, ok=True, result=text, attempts=1)
        self.add(position, record)
        self.published.append(record_item(step_key(self.run_id, position), record, self.run_id))
        stream = stream_key(self.run_id, key, position)
        self.published.append(record_item(stream, record, self.run_id))

    def take_published(self) -> list[Item]:
        """The records of ``set_event`` calls since the last take."""
        published, self.published = self.published, []
        return published

    def child(self, spec: ChildSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A child workflow run at the next position: its outcome, once it ended."""
        position = self._next()
        record = self._stored(position, spec.name)
        if record is None:
            self._wait([position], self._child(spec, position, args, kwargs))
            record = self.records[position]
        return self._outcome(record, position, spec.codec)

    def spawn_child(
        self, spec: ChildSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ChildHandle[Any]:
        """Take the next position for a child run that ``gather`` will start and await."""
        position = self._next()
        self._stored(position, spec.name)
        request = self._child(spec, position, args, kwargs)
        return ChildHandle(spec.name, position, spec.codec, request, run_id=request.run_id)

    def _child(
        self, spec: ChildSpec, position: int, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Child:
        parent = ParentLink(
            run_id=self.run_id,
            position=position,
            queue=self.workflow_queue,
            workflow=self.workflow,
        )
        text = spec.codec.encode_args(args, kwargs)
        return child_request(spec, parent, text, self.clock.now(), self.trace, self.priority)


CURRENT: ContextVar[RunContext | None] = ContextVar("querator_run", default=None)
"""The run whose body is executing in this context, if any (set in its fiber)."""
