"""The async API, lease renewal, and the pure parts (retry maths, codec, names)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
import pytest
from pydantic import ValidationError

from querator import AsyncQuerator, Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    AsyncWorker,
    RetryPolicy,
    Worker,
    start,
    start_async,
    step,
    workflow,
)
from querator.workflows.codec import Codec
from querator.workflows.functions import default_name
from querator.workflows.stored import StepPayload, StepRecord, WakePayload

from .conftest import RunWorker
from .flows import (
    CALLS,
    Order,
    async_double,
    async_flow,
    charge,
    checkout,
    reserve,
    ship,
    slow,
    slow_flow,
    step_a,
)


@pytest.mark.anyio
async def test_async_client_and_worker(aq: AsyncQuerator) -> None:
    worker = AsyncWorker(aq, [async_flow, async_double, step_a, checkout, reserve, charge, ship])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.arun)
        try:
            run = await start_async(aq, async_flow, 3)
            other = await start_async(aq, checkout, Order(id="async", cents=2))
            with anyio.fail_after(20):
                assert await run.result() == [6, 12, len("a:12")]
                assert (await other.result())["charged"] == 2
            assert await run.status() == "completed"
        finally:
            worker.stop()  # also when an assertion fails, so the task group can end


def test_long_step_keeps_its_lease_and_runs_once(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([slow_flow, slow]):
        run = start(q, slow_flow, "k")
        assert run.result(timeout=20) == "slow:k"
    assert CALLS["slow:k"] == 1


def test_steps_outside_a_workflow_just_run() -> None:
    assert step_a("x") == "a:x"
    assert checkout.name == "t.checkout" and reserve.name == "t.reserve"


def test_default_names_are_module_and_qualname() -> None:
    @step
    def local(x: int) -> int:
        return x

    @workflow(queue="elsewhere")
    def flow(x: int) -> int:
        return local(x)

    assert local.name == default_name(local.fn) == f"{__name__}.{local.fn.__qualname__}"
    assert flow.name.endswith("test_default_names_are_module_and_qualname.<locals>.flow")
    assert flow.queue == "elsewhere"


def test_retry_policy_maths() -> None:
    policy = RetryPolicy(max_attempts=4, initial=1.0, factor=2.0, max_delay=3.0, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 3.0]
    assert policy.decide(ValueError(), 1).retry
    assert not policy.decide(ValueError(), 4).retry
    strict = RetryPolicy(retry_on=(OSError,), fail_on=(FileNotFoundError,))
    assert strict.decide(OSError(), 1).retry
    assert not strict.decide(FileNotFoundError(), 1).retry
    assert not strict.decide(ValueError(), 1).retry
    jittered = RetryPolicy(initial=2.0)
    assert all(1.0 <= jittered.delay(1) <= 2.0 for _ in range(50))
    with pytest.raises(InvalidArgument):
        RetryPolicy(max_attemps=3)  # type: ignore[call-arg]


@dataclass
class Point:
    x: int
    y: int


def test_codec_round_trips_pydantic_types() -> None:
    def fn(p: Point, *rest: int, scale: float = 1.0, **extra: str) -> list[Point]:
        return [p]

    codec = Codec(fn, "fn")
    text = codec.encode_args((Point(1, 2), 3, 4), {"scale": 2.0, "tag": "t"})
    assert codec.decode_args(text) == ((Point(1, 2), 3, 4), {"scale": 2.0, "tag": "t"})
    assert codec.decode_result(codec.encode_result([Point(5, 6)])) == [Point(5, 6)]
    with pytest.raises(InvalidArgument):
        codec.encode_args(("not a point",), {})
    with pytest.raises(InvalidArgument):
        Codec(lambda x: x, "lambda").encode_result(object())


def test_codec_decodes_plain_parameters_as_pydantic_does() -> None:
    def fn(a: float, b: str, c: Point, d: int = 0, e=None) -> None:  # type: ignore[no-untyped-def]
        pass

    codec = Codec(fn, "fn")
    # every parameter given: positional, each validated unless its value is exactly its type
    text = '{"a": 1, "b": "x", "c": {"x": 1, "y": 2}, "d": 3, "e": [1]}'
    args, kwargs = codec.decode_call(text)
    assert (args, kwargs) == ((1.0, "x", Point(1, 2), 3, [1]), {})
    assert type(args[0]) is float  # an integer under a float annotation is still converted
    assert codec.decode_args(text) == (args, kwargs)
    # some left to their defaults: as BoundArguments gives them
    assert codec.decode_call('{"a": 2.5, "b": "y", "c": {"x": 0, "y": 0}}') == (
        (2.5, "y", Point(0, 0)),
        {},
    )
    with pytest.raises(TypeError):  # a parameter without a default is missing
        codec.decode_call('{"a": 1.5, "b": "x", "d": 1, "e": 2, "f": 3}')
    with pytest.raises(ValidationError):
        codec.decode_call('{"a": "nan?", "b": "x", "c": {"x": 1, "y": 2}, "d": 3, "e": 1}')


def test_codec_encodes_plain_values_as_pydantic_does() -> None:
    def fn(a: float, b: str, c: int, d: bool, e=None) -> float:  # type: ignore[no-untyped-def]
        return a

    codec = Codec(fn, "fn")
    # values exactly of their annotation (or under none) are written as they are,
    # others converted as pydantic converts them
    assert codec.encode_args((1.5, "x", 2, True, "y"), {}) == (
        '{"a":1.5,"b":"x","c":2,"d":true,"e":"y"}'
    )
    assert codec.encode_args((1, "x", True, 1, 7), {}) == '{"a":1.0,"b":"x","c":1,"d":true,"e":7}'
    assert codec.encode_result(2) == "2.0"
    assert codec.encode_result(float("inf")) == json.dumps(float("inf"))  # as pydantic gives it
    with pytest.raises(InvalidArgument):
        codec.encode_args((float("nan"), "x", 1, True), {})
    with pytest.raises(InvalidArgument):
        codec.encode_args((1.5, 3, 1, True), {})  # strict: no number as a string


class Opaque:
    pass


def test_unserialisable_annotation_fails_at_decoration() -> None:
    with pytest.raises(InvalidArgument, match="cannot be serialised"):

        @step
        def bad(x: Opaque) -> None:
            pass


def test_worker_refuses_two_functions_with_one_name(q: Querator) -> None:
    # a name of its own: the process-wide registry keeps the last step defined
    # under a name, which eager starts and workers of other tests resolve
    @step(name="t.twin")
    def one(key: str) -> str:
        return key

    @step(name="t.twin")
    def impostor(key: str) -> str:
        return key

    with pytest.raises(InvalidArgument, match="share the name"):
        Worker(q, [one, impostor])


def test_payloads_and_records_from_a_newer_version_are_read() -> None:
    """Unknown fields are accepted and kept (a rolling deploy: an older worker reads
    what a newer one wrote and writes it back whole), known ones still validated."""
    wake = WakePayload.model_validate_json('{"run_id": "run-1", "added_later": [1, 2]}')
    assert (wake.run_id, wake.meta) == ("run-1", None)
    assert json.loads(wake.model_dump_json())["added_later"] == [1, 2]
    record = StepRecord.model_validate_json('{"step": "s", "ok": true, "result": "1", "new": {}}')
    assert (record.step, record.ok, record.result) == ("s", True, "1")
    with pytest.raises(ValidationError):
        StepPayload.model_validate_json('{"run_id": "run-1", "position": "not a number"}')
