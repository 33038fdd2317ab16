"""Spans of workflow runs in one process: start, step attempts, compensations, sleeps.

The in-memory SDK (``otel``) collects every span; each test keeps only those of
the trace its own caller span opened.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from otel_sdk import Telemetry
from worker_threads import serving

from querator import AsyncQuerator, Querator, telemetry
from querator.telemetry.runs import ATTEMPT, OUTCOME, POSITION, QUEUE, RUN_ID, STEP
from querator.workflows import SagaFailed, Worker
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta

from .flows import FLAKY, napping, parent, retrying, three, trip


@pytest.fixture
def q() -> Iterator[Querator]:
    with Querator("memory://") as client:
        yield client


def _traced(otel: Telemetry, trace_id: int, prefix: str = "") -> list[ReadableSpan]:
    spans = [s for s in otel.finished(trace_id) if s.name.startswith(prefix)]
    return sorted(spans, key=lambda s: s.start_time or 0)


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def test_a_run_is_one_trace_under_the_callers_span(q: Querator, otel: Telemetry) -> None:
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(three, 5)
    trace_id = caller.get_span_context().trace_id
    stored = q.lookup(RESULTS_QUEUE, [meta_key(run.run_id)])[meta_key(run.run_id)]
    assert "traceparent" in RunMeta.model_validate_json(stored.payload).trace
    with serving(Worker(q, [three], poll_timeout=1.0)):
        assert run.result(timeout=20) == 40

    [start] = _traced(otel, trace_id, "start ")
    assert start.name == "start tel.three" and start.kind is SpanKind.PRODUCER
    assert _parent_id(start) == caller.get_span_context().span_id
    assert start.attributes is not None and start.attributes[RUN_ID] == run.run_id
    steps = _traced(otel, trace_id, "step ")
    assert [s.name for s in steps] == ["step tel.double"] * 3
    for position, span in enumerate(steps):
        assert _parent_id(span) == _span_id(start)
        attributes = dict(span.attributes or {})
        assert attributes[RUN_ID] == run.run_id
        assert attributes[STEP] == "tel.double"
        assert (attributes[POSITION], attributes[ATTEMPT]) == (position, 1)
        assert attributes[QUEUE] == "querator.workflows"
        assert attributes[OUTCOME] == "completed"
        assert span.status.status_code is StatusCode.UNSET


def test_a_child_run_has_a_start_span_of_its_own(q: Querator, otel: Telemetry) -> None:
    """The child's ``start`` span is a child of its parent run's, in the same trace,
    and the child's steps nest under it (the parent's steps under the parent's)."""
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(parent, 1)
    with serving(Worker(q, [parent, three], poll_timeout=1.0)):
        assert run.result(timeout=20) == 16
    trace_id = caller.get_span_context().trace_id
    starts = {s.name: s for s in _traced(otel, trace_id, "start ")}
    assert set(starts) == {"start tel.parent", "start tel.three"}
    outer, inner = starts["start tel.parent"], starts["start tel.three"]
    assert _parent_id(inner) == _span_id(outer)
    assert inner.kind is SpanKind.PRODUCER
    child_id = dict(inner.attributes or {})[RUN_ID]
    assert child_id != run.run_id and dict(outer.attributes or {})[RUN_ID] == run.run_id
    steps = _traced(otel, trace_id, "step ")
    by_run: dict[object, list[int | None]] = {}
    for span in steps:
        by_run.setdefault(dict(span.attributes or {})[RUN_ID], []).append(_parent_id(span))
    assert by_run == {child_id: [_span_id(inner)] * 3, run.run_id: [_span_id(outer)]}


def test_no_sdk_parent_means_a_run_of_its_own(q: Querator, otel: Telemetry) -> None:
    run = q.start(three, 1)
    stored = q.lookup(RESULTS_QUEUE, [meta_key(run.run_id)])[meta_key(run.run_id)]
    trace = RunMeta.model_validate_json(stored.payload).trace
    found = telemetry.span_context(trace)
    assert found is not None
    traced = _traced(otel, found.trace_id)  # the start span and its send spans
    [start] = [span for span in traced if span.name.startswith("start ")]
    assert start.parent is None and start.name == "start tel.three"
    assert all(span.parent is not None for span in traced if span is not start)


def test_replays_make_no_step_spans(q: Querator, otel: Telemetry) -> None:
    """With no live bodies every step resumes its run by a replay: the replays
    return the earlier steps from the history, and those make no spans."""
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(three, 1)
    with serving(Worker(q, [three], poll_timeout=1.0, max_live_runs=0)) as worker:
        assert run.result(timeout=20) == 8
        assert worker.worker.engine.counts["replayed"] >= 3
    steps = _traced(otel, caller.get_span_context().trace_id, "step ")
    assert [dict(s.attributes or {})[POSITION] for s in steps] == [0, 1, 2]


def test_a_failed_attempt_records_its_error(q: Querator, otel: Telemetry) -> None:
    FLAKY["k1"] = 1
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(retrying, "k1")
    with serving(Worker(q, [retrying], poll_timeout=1.0)):
        assert run.result(timeout=20) == "k1"
    first, second = _traced(otel, caller.get_span_context().trace_id, "step ")
    assert dict(first.attributes or {})[ATTEMPT] == 1
    assert dict(first.attributes or {})[OUTCOME] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "RuntimeError: flaky k1: 1 failure(s) left"
    [event] = first.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"] == "RuntimeError"
    assert "Traceback" in str(dict(event.attributes or {})["exception.stacktrace"])
    assert dict(second.attributes or {})[ATTEMPT] == 2
    assert dict(second.attributes or {})[OUTCOME] == "completed"


def test_a_saga_makes_a_span_per_compensation(q: Querator, otel: Telemetry) -> None:
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(trip, ["car", "hotel", "bad"])
    with serving(Worker(q, [trip], poll_timeout=1.0)), pytest.raises(SagaFailed):
        run.result(timeout=20)
    trace_id = caller.get_span_context().trace_id
    [start] = _traced(otel, trace_id, "start ")
    steps = _traced(otel, trace_id, "step ")
    assert [dict(s.attributes or {})[OUTCOME] for s in steps] == ["completed"] * 2 + ["failed"]
    assert steps[-1].status.status_code is StatusCode.ERROR
    undo = _traced(otel, trace_id, "compensate ")
    assert [s.name for s in undo] == ["compensate tel.cancel"] * 2
    # Reverse order: the hotel (position 1) is compensated before the car (0).
    assert [dict(s.attributes or {})[POSITION] for s in undo] == [1, 0]
    assert all(_parent_id(s) == _span_id(start) for s in undo)
    assert all(dict(s.attributes or {})[OUTCOME] == "completed" for s in undo)


def test_a_durable_sleep_has_a_span(q: Querator, otel: Telemetry) -> None:
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(napping, 3)
    with serving(Worker(q, [napping], poll_timeout=1.0)):
        assert run.result(timeout=20) == 6
    trace_id = caller.get_span_context().trace_id
    [start] = _traced(otel, trace_id, "start ")
    [nap] = _traced(otel, trace_id, "sleep")
    assert _parent_id(nap) == _span_id(start)
    assert dict(nap.attributes or {})[POSITION] == 0
    assert nap.end_time is not None and nap.start_time is not None
    assert nap.end_time - nap.start_time >= 50_000_000  # it slept its 0.05 s
    [after] = _traced(otel, trace_id, "step ")
    assert after.start_time is not None and after.start_time >= nap.end_time


def test_async_start_is_a_child_of_the_current_span(otel: Telemetry) -> None:
    async def main() -> tuple[int, int | None]:
        async with AsyncQuerator("memory://") as aq:
            with telemetry.tracer().start_as_current_span("caller") as caller:
                await aq.start(three, 2)
            [start] = _traced(otel, caller.get_span_context().trace_id, "start ")
            return caller.get_span_context().span_id, _parent_id(start)

    caller_id, parent_id = anyio.run(main)
    assert parent_id == caller_id
