"""Bad input gets a short, typed error naming the argument, before anything is
written; the defaults are accepted when given explicitly; ``retry=None`` means
what it says."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from querator import Querator, QueueSettings
from querator.errors import InvalidArgument
from querator.workflows import RetryPolicy, WorkflowFailed, start, step, workflow
from querator.workflows.functions import NO_RETRY
from querator.workflows.inspection import get_run, list_runs

from .conftest import RunWorker
from .flows import CALLS, count_call


@step(name="b.once", retry=None)
def once(key: str) -> str:
    count_call(f"once:{key}")
    raise RuntimeError("fails every time")


@workflow(name="b.single")
def single(key: str) -> str:
    return once(key)


@workflow(name="b.echo")
def echo(text: str) -> str:
    return text


def test_retry_none_means_one_attempt(q: Querator, run_worker: RunWorker) -> None:
    assert once.retry == NO_RETRY
    with run_worker([single]):
        run = start(q, single, "r1")
        with pytest.raises(WorkflowFailed):
            run.result(timeout=20)
    assert CALLS["once:r1"] == 1
    [failed] = get_run(q, run.run_id).steps
    assert (failed.attempts, failed.error_type) == (1, "RuntimeError")


def test_a_huge_argument_names_the_workflow_and_writes_nothing(q: Querator) -> None:
    with pytest.raises(InvalidArgument) as error:
        start(q, echo, "x" * 70_000_000)
    message = str(error.value)
    assert "workflow 'b.echo' arguments" in message and "70,000,0" in message
    assert "querator." not in message  # no internal queue named
    assert len(message) < 200
    assert list_runs(q) == []


def test_a_long_bad_name_is_quoted_short(q: Querator) -> None:
    with pytest.raises(InvalidArgument) as error:
        q.create_queue("bad name " + "x" * 10_000)
    message = str(error.value)
    assert len(message) < 200 and "(10,009 characters)" in message
    assert q.list_queues() == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0.0])
def test_a_bad_lease_timeout_says_what_is_wrong(value: float) -> None:
    with pytest.raises(InvalidArgument, match="lease_timeout") as error:
        QueueSettings(lease_timeout=value)
    if not math.isfinite(value):
        assert "finite number" in str(error.value)


def test_zero_delay_and_jitter_the_defaults_are_accepted(q: Querator) -> None:
    run = start(q, echo, "now", delay=0)
    assert run.status() == "running"
    q.schedule("b.every-minute", echo, cron="* * * * *", args=("tick",), jitter=0)
    q.schedule("b.every-minute-2", echo, cron="* * * * *", args=("tick",), jitter=0.0)
    for bad in (-1.0, float("nan")):
        with pytest.raises(InvalidArgument, match="delay"):
            start(q, echo, "later", delay=bad)
        with pytest.raises(InvalidArgument, match="jitter"):
            q.schedule("b.bad", echo, cron="* * * * *", args=("x",), jitter=bad)


def test_retry_forever_is_max_attempts_zero() -> None:
    forever = RetryPolicy(max_attempts=0, jitter=False)
    assert forever.decide(RuntimeError(), 10_000).retry
    assert not RetryPolicy(max_attempts=1).decide(RuntimeError(), 1).retry


@workflow(name="b.measure")
def measure(value: float, *more: Any, **named: Any) -> float:
    return value


def test_nan_and_infinities_in_arguments_are_refused_naming_the_argument(q: Querator) -> None:
    refused: dict[str, Callable[[], object]] = {
        "value": lambda: start(q, measure, math.nan),
        "more": lambda: start(q, measure, 1.0, [2.0, math.inf]),
        "named": lambda: start(q, measure, 1.0, extra={"deep": -math.inf}),
    }
    for name, call in refused.items():
        with pytest.raises(InvalidArgument) as error:
            call()
        assert error.value.field == f"workflow 'b.measure' argument {name!r}"
        assert "NaN or an infinity" in error.value.rule
    assert list_runs(q) == []  # nothing was written
    assert start(q, measure, 1.5, [2.0], extra={"deep": 0.0}).run_id
