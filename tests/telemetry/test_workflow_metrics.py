"""Workflow metrics after a known workload: runs started and ended, step attempts.

The SDK's meter provider is cumulative and shared by the tests of one process,
so each test reads the instruments before and after its workload and checks
the difference.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, NumberDataPoint
from otel_sdk import Telemetry
from worker_threads import serving

from querator import Querator
from querator.telemetry.workflow_metrics import (
    RUNS_ENDED,
    RUNS_STARTED,
    STEP_ATTEMPTS,
    STEP_DURATION,
)
from querator.workflows import SagaFailed, Worker

from .flows import FLAKY, retrying, three, trip

Key = tuple[str, frozenset[tuple[str, object]]]


def _read(otel: Telemetry) -> dict[Key, float]:
    """Every data point of querator's workflow instruments: a counter's value, a
    histogram's count (``name`` + ``:count``) and sum (``:sum``)."""
    values: dict[Key, float] = {}
    data = otel.metrics.get_metrics_data()
    if data is None:
        return values
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if not metric.name.startswith("querator.workflow."):
                    continue
                for point in metric.data.data_points:
                    attributes = frozenset((point.attributes or {}).items())
                    if isinstance(point, HistogramDataPoint):
                        values[metric.name + ":count", attributes] = point.count
                        values[metric.name + ":sum", attributes] = point.sum
                    elif isinstance(point, NumberDataPoint):
                        values[metric.name, attributes] = point.value
    return values


def _delta(before: dict[Key, float], after: dict[Key, float]) -> dict[Key, float]:
    changed = {key: value - before.get(key, 0) for key, value in after.items()}
    return {key: value for key, value in changed.items() if value}


def _key(name: str, **attributes: object) -> Key:
    return name, frozenset((f"querator.{k.replace('_', '.')}", v) for k, v in attributes.items())


@pytest.fixture
def q() -> Iterator[Querator]:
    with Querator("memory://") as client:
        yield client


def test_metric_values_after_a_known_workload(q: Querator, otel: Telemetry) -> None:
    before = _read(otel)
    FLAKY.update({"m1": 2, "m2": 0})
    runs = [q.start(three, n) for n in range(3)]
    flaky = [q.start(retrying, key) for key in ("m1", "m2")]
    saga = q.start(trip, ["car", "bad"])
    again = q.start(three, 0, idempotency_key="metrics-once")
    q.start(three, 0, idempotency_key="metrics-once")  # the same run: not counted twice
    with serving(Worker(q, [three, retrying, trip], poll_timeout=1.0)):
        assert [run.result(timeout=20) for run in runs] == [0, 8, 16]
        assert [run.result(timeout=20) for run in flaky] == ["m1", "m2"]
        assert again.result(timeout=20) == 0
        with pytest.raises(SagaFailed):
            saga.result(timeout=20)
    delta = _delta(before, _read(otel))

    started, ended = RUNS_STARTED, RUNS_ENDED
    status = "querator.run.status"
    expected_runs = {
        (started, frozenset({("querator.workflow.name", "tel.three")})): 4,
        (started, frozenset({("querator.workflow.name", "tel.retrying")})): 2,
        (started, frozenset({("querator.workflow.name", "tel.trip")})): 1,
        (ended, frozenset({("querator.workflow.name", "tel.three"), (status, "completed")})): 4,
        (
            ended,
            frozenset({("querator.workflow.name", "tel.retrying"), (status, "completed")}),
        ): 2,
        (ended, frozenset({("querator.workflow.name", "tel.trip"), (status, "compensated")})): 1,
    }
    assert {k: v for k, v in delta.items() if k[0] in (started, ended)} == expected_runs

    def attempts(step: str, outcome: str, queue: str = "querator.workflows") -> float:
        return delta.get(_key(STEP_ATTEMPTS, step_name=step, queue=queue, step_outcome=outcome), 0)

    assert attempts("tel.double", "completed") == 3 * 4
    assert attempts("tel.flaky", "retried") == 2
    assert attempts("tel.flaky", "completed") == 2
    assert attempts("tel.reserve", "completed") == 1
    assert attempts("tel.reserve", "failed") == 1
    assert attempts("tel.cancel", "completed") == 1
    # One duration per attempt, of a plausible size (seconds, not milliseconds).
    for key, count in delta.items():
        name, attributes = key
        if name == STEP_DURATION + ":count":
            assert count == delta[STEP_ATTEMPTS, attributes]
            assert 0 < delta[STEP_DURATION + ":sum", attributes] < 10 * count


def test_a_run_no_worker_serves_waits_and_ends_once_served(q: Querator, otel: Telemetry) -> None:
    before = _read(otel)
    run = q.start(three, 1)
    with serving(Worker(q, [retrying], poll_timeout=1.0)):  # nobody serves tel.three
        assert q.start(retrying, "served").result(timeout=20) == "served"
    assert run.status() == "running"  # waits: never failed by a worker that does not serve it
    with serving(Worker(q, [three], poll_timeout=1.0)):
        run.result(timeout=20)
    delta = _delta(before, _read(otel))
    name = ("querator.workflow.name", "tel.three")
    ended = {k: v for k, v in delta.items() if k[0] == RUNS_ENDED and name in k[1]}
    assert ended == {(RUNS_ENDED, frozenset({name, ("querator.run.status", "completed")})): 1}
