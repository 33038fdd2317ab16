"""The replay context: what a step call inside a workflow body sees. Pure, no I/O.

All the run's stored records are fetched before the body runs, so each call at
a position (a step, a timer, a gather, a child workflow) either returns its
stored outcome, raises its stored failure, or adds the items that must be
produced to :attr:`ReplayContext.produce` and suspends the replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, NoReturn, TypeVar

from querator.queue.models import Item
from querator.workflows.codec import Codec
from querator.workflows.errors import NonDeterminism, StepFailed, WorkflowSuspended
from querator.workflows.layout import (
    RESULTS_QUEUE,
    SLEEP_STEP,
    ParentLink,
    RunMeta,
    StepPayload,
    StepRecord,
    child_run_id,
    record_item,
    start_items,
    step_item,
    step_key,
    wake_item,
)

__all__ = ["CURRENT", "Called", "ReplayContext", "StepHandle", "Undo"]

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
    """A step call with a compensation, as the replay met it."""

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
    dispatch: tuple[str, StepPayload] | None = None
    """(queue, payload) of the step item (inside a workflow body)."""
    value: Any = None
    """The result, when the step ran inline (outside a workflow body)."""


@dataclass
class ReplayContext:
    """One replay of one run, at the instant ``now``."""

    run_id: str
    workflow_queue: str
    records: dict[int, StepRecord]
    now: datetime
    position: int = 0
    produce: dict[str, list[Item]] = field(default_factory=dict)
    """Items to produce with the completion of the wake task, once suspended."""
    suspended: WorkflowSuspended | None = None
    """Set when the replay must stop: something has no stored outcome yet."""
    fatal: NonDeterminism | None = None
    """Set when the body diverged from the stored history."""
    known: int = 1 << 62
    """Positions below this were looked up; reaching past it asks for more."""
    need: int | None = None
    """Set when the body reached position ``need`` >= ``known``: load and replay again."""
    compensable: dict[int, Called] = field(default_factory=dict)
    """Step calls met by this replay that declare a compensation, by position."""
    dispatching: bool = True
    """False while a saga is aborted (cancel, timeout): nothing new is dispatched."""
    awaited: list[tuple[str, int]] = field(default_factory=list)
    """(queue, position) of the steps the replay suspended on, without a record."""
    dispatched: list[tuple[str, int]] = field(default_factory=list)
    """(queue, position) of the step items this replay produces."""
    payloads: dict[str, StepPayload] = field(default_factory=dict)
    """The payloads of the step items this replay produces, by their dedup key."""

    def _next(self) -> int:
        if self.fatal is not None:
            raise self.fatal
        if self.suspended is not None:
            raise self.suspended
        position = self.position
        self.position += 1
        if position >= self.known:
            self.need = position
            self._suspend(position, "records not loaded yet")
        return position

    def _stored(self, position: int, name: str) -> StepRecord | None:
        record = self.records.get(position)
        if record is not None and record.step != name:
            self.fatal = NonDeterminism(position, record.step, name)
            raise self.fatal
        return record

    def _add(self, queue: str, item: Item) -> None:
        if self.dispatching:
            self.produce.setdefault(queue, []).append(item)

    def _dispatch(self, queue: str, position: int, payload: StepPayload) -> None:
        if self.dispatching:
            item = step_item(payload)
            self.produce.setdefault(queue, []).append(item)
            self.dispatched.append((queue, position))
            if item.dedup_key is not None:
                self.payloads[item.dedup_key] = payload

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

    def _suspend(self, position: int, what: str) -> NoReturn:
        self.suspended = WorkflowSuspended(position, what)
        raise self.suspended

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
        self, name: str, position: int, codec: Codec, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> StepPayload:
        return StepPayload(
            run_id=self.run_id,
            position=position,
            step=name,
            args=codec.encode_args(args, kw),
            workflow_queue=self.workflow_queue,
        )

    def call(
        self,
        name: str,
        queue: str | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
    ) -> Any:
        """A step call at the next position: its stored outcome, or a suspension."""
        position = self._next()
        record = self._stored(position, name)
        self._note(position, name, undo, args, kwargs)
        if record is None:
            payload = self._payload(name, position, codec, args, kwargs)
            self._dispatch(queue or self.workflow_queue, position, payload)
            self.awaited.append((queue or self.workflow_queue, position))
            self._suspend(position, name)
        return self._outcome(record, position, codec)

    def spawn(
        self,
        name: str,
        queue: str | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        undo: Undo | None = None,
    ) -> StepHandle[Any]:
        """Take the next position for a step that ``gather`` will dispatch and await."""
        position = self._next()
        self._stored(position, name)
        self._note(position, name, undo, args, kwargs)
        payload = self._payload(name, position, codec, args, kwargs)
        return StepHandle(name, position, codec, (queue or self.workflow_queue, payload))

    def gather(self, handles: Sequence[StepHandle[Any]]) -> list[Any]:
        """All results in order; dispatches every missing member at once, then suspends.

        A failed member raises its :class:`StepFailed` once every member ended.
        """
        if self.fatal is not None:
            raise self.fatal
        if self.suspended is not None:
            raise self.suspended
        missing = [h for h in handles if h.position not in self.records]
        if missing:
            # Members are dispatched in one transaction: once any has a record,
            # all were dispatched, and a deferred one must not be dispatched twice.
            if len(missing) == len(handles):
                for handle in missing:
                    assert handle.dispatch is not None
                    self._dispatch(handle.dispatch[0], handle.position, handle.dispatch[1])
            for handle in missing:
                assert handle.dispatch is not None
                self.awaited.append((handle.dispatch[0], handle.position))
            self._suspend(missing[0].position, f"gather of {len(handles)} steps")
        return [self._outcome(self.records[h.position], h.position, h.codec) for h in handles]

    def sleep_until(self, until: datetime) -> None:
        """A durable timer at the next position; ``until`` is stored the first time."""
        position = self._next()
        record = self._stored(position, SLEEP_STEP)
        if record is None:
            stored = StepRecord(step=SLEEP_STEP, ok=True, result="null", until=until)
            self._add(
                RESULTS_QUEUE, record_item(step_key(self.run_id, position), stored, self.run_id)
            )
        elif record.until is None or self.now >= record.until:
            return
        else:
            until = record.until
        # Scheduled with the record; produced again only to survive a wake that
        # came early (another wake, or clocks that disagree): dedup keeps one.
        self._add(self.workflow_queue, wake_item(self.run_id, str(position), until))
        self._suspend(position, SLEEP_STEP)

    def sleep(self, seconds: float) -> None:
        """:meth:`sleep_until` ``now + seconds`` (computed by the first replay only)."""
        self.sleep_until(self.now + timedelta(seconds=seconds))

    def child(
        self,
        name: str,
        queue: str | None,
        timeout: float | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """A child workflow run at the next position: its stored outcome, or a start."""
        position = self._next()
        record = self._stored(position, name)
        if record is not None:
            return self._outcome(record, position, codec)
        meta = RunMeta(
            workflow=name,
            args=codec.encode_args(args, kwargs),
            queue=queue or self.workflow_queue,
            started_at=self.now,
            deadline=self.now + timedelta(seconds=timeout) if timeout is not None else None,
            parent=ParentLink(run_id=self.run_id, position=position, queue=self.workflow_queue),
        )
        for target, items in start_items(child_run_id(self.run_id, position), meta).items():
            for item in items:
                self._add(target, item)
        self._suspend(position, name)


CURRENT: ContextVar[ReplayContext | None] = ContextVar("querator_replay", default=None)
"""The replay in progress in this task or thread, if any."""
