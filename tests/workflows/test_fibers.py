"""Live bodies' fibers: parked without a thread, resumed in their own context,
torn down where they parked (their ``finally`` blocks run there and then)."""

from __future__ import annotations

import contextlib
import contextvars
import threading

import anyio
import pytest

from querator.workflows.engine.fiber import Evicted, Fiber, Finished, park

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="engine")


def _fiber(target: object) -> Fiber:
    return Fiber(target, contextvars.copy_context())  # type: ignore[arg-type]


def test_a_sync_body_parks_resumes_and_ends_in_its_own_context() -> None:
    seen: list[tuple[str, str]] = []

    def body() -> int:
        WHO.set("body")
        park("first")
        seen.append(("after first", WHO.get()))
        park("second")
        return 42

    async def drive() -> list[object]:
        fiber = _fiber(body)
        got = [await fiber.resume(), WHO.get()]
        got += [await fiber.resume(), await fiber.resume()]
        return got

    assert anyio.run(drive) == ["first", "engine", "second", Finished(42)]
    assert seen == [("after first", "body")]


def test_an_async_body_awaits_real_things_between_its_parks() -> None:
    async def body() -> str:
        park("step")
        await anyio.sleep(0.001)  # not the engine's: relayed to the event loop
        return "done"

    async def drive() -> list[object]:
        fiber = _fiber(body)
        return [await fiber.resume(), await fiber.resume()]

    assert anyio.run(drive) == ["step", Finished("done")]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_teardown_runs_finally_in_the_body_and_cannot_be_swallowed(kind: str) -> None:
    events: list[str] = []

    def sync_body() -> None:
        WHO.set("body")
        try:
            try:
                park("waiting")
            except Exception:
                events.append("swallowed")  # Evicted is not an Exception
        finally:
            events.append(f"finally in {WHO.get()} on {threading.current_thread().name}")

    async def async_body() -> None:
        WHO.set("body")
        try:
            park("waiting")
        finally:
            await anyio.sleep(0)  # a finally block may await
            events.append(f"finally in {WHO.get()} on {threading.current_thread().name}")

    async def drive() -> bool:
        fiber = _fiber(sync_body if kind == "sync" else async_body)
        assert await fiber.resume() == "waiting"
        await fiber.close()
        return fiber.dead

    assert anyio.run(drive)
    assert events == [f"finally in body on {threading.current_thread().name}"]


def test_a_body_that_keeps_swallowing_its_teardown_is_abandoned_not_looped() -> None:
    def stubborn() -> None:
        while True:
            with contextlib.suppress(BaseException):  # the point of the test
                park("again")

    async def drive() -> bool:
        fiber = _fiber(stubborn)
        await fiber.resume()
        await fiber.close()
        return fiber.dead

    assert anyio.run(drive) is False  # kept referenced, never torn down elsewhere


def test_park_outside_a_body_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="outside a live workflow body"):
        park("nothing")


def test_evicted_is_not_an_exception() -> None:
    assert not issubclass(Evicted, Exception)
