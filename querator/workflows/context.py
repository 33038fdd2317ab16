"""The replay context: what a step call inside a workflow body sees. Pure, no I/O.

All the run's stored step records are fetched before the body runs, so a step
call either returns its stored result, raises its stored failure, or records
that it must be dispatched and suspends the replay.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from querator.workflows.codec import Codec
from querator.workflows.errors import NonDeterminism, StepFailed, WorkflowSuspended
from querator.workflows.layout import StepPayload, StepRecord

__all__ = ["CURRENT", "ReplayContext"]


@dataclass
class ReplayContext:
    """One replay of one run."""

    run_id: str
    workflow_queue: str
    records: dict[int, StepRecord]
    position: int = 0
    dispatch: tuple[str, StepPayload] | None = None
    """(queue, payload) of the step to run next, once the replay suspended."""
    fatal: NonDeterminism | None = None
    """Set when the body diverged from the stored history."""
    visited: list[int] = field(default_factory=list)

    def call(
        self,
        name: str,
        queue: str | None,
        codec: Codec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """A step call at the next position: its stored outcome, or a suspension."""
        if self.fatal is not None:
            raise self.fatal
        if self.dispatch is not None:
            raise WorkflowSuspended(self.dispatch[1].position, self.dispatch[1].step)
        position = self.position
        self.position += 1
        record = self.records.get(position)
        if record is None:
            payload = StepPayload(
                run_id=self.run_id,
                position=position,
                step=name,
                args=codec.encode_args(args, kwargs),
                workflow_queue=self.workflow_queue,
            )
            self.dispatch = (queue or self.workflow_queue, payload)
            raise WorkflowSuspended(position, name)
        if record.step != name:
            self.fatal = NonDeterminism(position, record.step, name)
            raise self.fatal
        if not record.ok:
            error = record.error
            raise StepFailed(
                name,
                position,
                error.type if error else "Exception",
                error.message if error else "",
            )
        assert record.result is not None
        return codec.decode_result(record.result)


CURRENT: ContextVar[ReplayContext | None] = ContextVar("querator_replay", default=None)
"""The replay in progress in this task or thread, if any."""
