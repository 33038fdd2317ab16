"""Spans and metrics of workflow runs: start, step attempts, compensations, durable sleeps.

A run's trace begins with the ``start {workflow}`` span, a child of the caller's
current span (a child run's, of its parent run's ``start`` span, in the same
trace: its steps nest under it). Its context (W3C ``traceparent`` / ``tracestate``) is stored with
the run (``RunMeta.trace``) and copied into the headers of the run's items, so
every worker that handles one of them joins the same trace (:func:`joined`),
a replay after a crash included. Under it:

- ``step {name}``: one span per attempt of a step (``compensate {name}`` for a
  saga's compensations), with the run id, position, attempt, queue and outcome;
  an attempt that raised records the exception and has status ERROR;
- ``sleep``: one span per durable timer, from the moment it was stored to the
  moment its wake resumed the run.

Steps a replay returns from the run's history make no span: only code that
really runs does. The workflow body itself has no span (it only orchestrates).

With no SDK configured every span is the API's no-op; attributes are only built
for recording spans, and instruments are the API's proxies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from querator.telemetry import extract, inject, workflow_metrics
from querator.telemetry import tracer as _new_tracer

__all__ = [
    "ATTEMPT",
    "OUTCOME",
    "POSITION",
    "QUEUE",
    "RUN_ID",
    "SLEEP_SPAN",
    "STEP",
    "WORKFLOW",
    "Attempt",
    "Started",
    "joined",
    "slept",
    "starting",
    "step_attempt",
]

RUN_ID = "querator.run.id"
WORKFLOW = "querator.workflow.name"
STEP = "querator.step.name"
POSITION = "querator.step.position"
ATTEMPT = "querator.step.attempt"
QUEUE = "querator.queue"
OUTCOME = "querator.step.outcome"
"""``completed``, ``failed`` (for good), ``retried``, ``deferred`` or
``interrupted`` (the attempt raised out of the worker: it is stopping, or the
store became unreachable; another attempt follows once the lease expires)."""
EXISTING = "querator.run.existing"
"""On ``start`` spans: the idempotency key named a run that already existed."""
UNTIL = "querator.sleep.until"
SLEEP_SPAN = "sleep"


tracer = cache(_new_tracer)
"""querator's tracer, made once (a proxy that follows the SDK once it is set)."""


@dataclass
class Started:
    """The ``start`` span of a run being created, and the trace context to store with it."""

    span: trace.Span
    carrier: dict[str, str] = field(default_factory=dict)
    """``traceparent`` (and ``tracestate``) of the span: empty with no SDK and no parent."""

    def created(self, run_id: str, workflow: str, existing: bool) -> None:
        """Note the run's id (``existing``: the start found the run already there)."""
        if self.span.is_recording():
            self.span.set_attribute(RUN_ID, run_id)
            if existing:
                self.span.set_attribute(EXISTING, True)
        if not existing:
            workflow_metrics.run_started(workflow)


@contextmanager
def starting(
    workflow: str, queue: str, parent: Mapping[str, str] | None = None
) -> Iterator[Started]:
    """The ``start {workflow}`` span, current while the run is created (a child of
    the caller's current span, or of the trace context ``parent`` holds: a child
    run's start is a child of its parent run's); an error raised inside is
    recorded on it."""
    attributes: dict[str, AttributeValue] = {WORKFLOW: workflow, QUEUE: queue}
    span = tracer().start_span(
        f"start {workflow}",
        context=extract(parent) if parent else None,
        kind=SpanKind.PRODUCER,
        attributes=attributes,
    )
    with trace.use_span(span, end_on_exit=True):
        started = Started(span)
        inject(started.carrier, trace.set_span_in_context(span))
        yield started


class _Joined:
    """The context manager :func:`joined` returns when there is a context to attach."""

    __slots__ = ("ctx", "token")

    def __init__(self, ctx: otel_context.Context) -> None:
        self.ctx = ctx
        self.token: object = None

    def __enter__(self) -> None:
        self.token = otel_context.attach(self.ctx)

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self.token)  # type: ignore[arg-type]


_NOTHING = nullcontext()


def joined(carrier: Mapping[str, str]) -> AbstractContextManager[None]:
    """Make the run whose trace context ``carrier`` holds (an item's headers, a
    run's stored context) the current context: what is traced inside joins it.

    Nothing happens when ``carrier`` holds no trace context (no SDK at start)."""
    ctx = extract(carrier)
    return _NOTHING if ctx is None else _Joined(ctx)


class Attempt:
    """The span of one step attempt, current inside ``with`` when it records; say
    how the attempt ended with :meth:`ended`. Its duration and outcome are also
    counted (see :mod:`.workflow_metrics`)."""

    __slots__ = ("began", "outcome", "queue", "span", "step", "token")

    def __init__(self, span: trace.Span, step: str, queue: str) -> None:
        self.span = span
        self.step = step
        self.queue = queue
        self.outcome = "interrupted"
        self.began = 0.0
        self.token: object = None

    def __enter__(self) -> Attempt:
        if self.span.is_recording():
            self.token = otel_context.attach(trace.set_span_in_context(self.span))
        self.began = time.perf_counter()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        took = time.perf_counter() - self.began
        workflow_metrics.step_ended(self.step, self.queue, self.outcome, took)
        if self.token is None:
            return  # not recording: nothing to end
        otel_context.detach(self.token)  # type: ignore[arg-type]
        span = self.span
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}: {error}"))
        span.end()

    def ended(self, outcome: str, error: BaseException | None = None) -> None:
        """The attempt's outcome (see :data:`OUTCOME`) and the error it raised, if any."""
        self.outcome = outcome
        span = self.span
        if not span.is_recording():
            return
        span.set_attribute(OUTCOME, outcome)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}: {error}"))


def step_attempt(
    run_id: str,
    step: str,
    position: int,
    attempt: int,
    queue: str,
    compensation: bool = False,
) -> Attempt:
    """The span of one attempt of a step (or compensation), to use with ``with``."""
    name = f"compensate {step}" if compensation else f"step {step}"
    span = tracer().start_span(name, kind=SpanKind.CONSUMER)
    if span.is_recording():
        span.set_attributes(
            {RUN_ID: run_id, STEP: step, POSITION: position, ATTEMPT: attempt, QUEUE: queue}
        )
    return Attempt(span, step, queue)


def slept(
    run_id: str, position: int, since: datetime, until: datetime, trace_: Mapping[str, str]
) -> None:
    """The span of a durable sleep that ended now (stored at ``since``, due at
    ``until``), in the run's trace (``trace_``: the run's stored context)."""
    span = tracer().start_span(
        SLEEP_SPAN,
        context=extract(trace_),
        start_time=int(since.timestamp() * 1e9),
        attributes={RUN_ID: run_id, POSITION: position, UNTIL: until.isoformat()},
    )
    span.end()
