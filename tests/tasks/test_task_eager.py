"""Eager attempts: an async task's first step runs at once, in a copy of the
context; one that suspends goes on in the task that started it (no store
needed), and a worker runs a batch of them, quick and suspending, each once."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import pytest

from querator import AsyncQuerator
from querator.queue.models import Leased
from querator.tasks import task
from querator.tasks.eager import start
from querator.workflows.engine.worker import AsyncWorker

pytestmark = pytest.mark.anyio

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("test_task_eager_who", default="-")


async def _quick(value: int) -> int:
    WHO.set("quick")
    return value * 2


async def _failing() -> None:
    raise ValueError("at once")


async def _suspending(event: anyio.Event) -> tuple[str, str]:
    WHO.set("inside")
    with anyio.fail_after(10):  # a cancel scope entered before the suspension
        await event.wait()
    return WHO.get(), "woken"


async def test_a_quick_attempt_finishes_in_its_first_step_in_a_context_of_its_own() -> None:
    WHO.set("caller")
    started = start(_quick, (21,), {})
    assert (started.done, started.outcome) == (True, 42)
    failed = start(_failing, (), {})
    assert failed.done and isinstance(failed.outcome, ValueError)
    assert WHO.get() == "caller"


async def test_a_suspended_attempt_goes_on_in_the_awaiting_task_in_its_own_context() -> None:
    event = anyio.Event()
    WHO.set("caller")

    async def wake() -> None:
        event.set()

    async with anyio.create_task_group() as group:
        # started and resumed under the same cancel scope, as the worker does
        started = start(_suspending, (event,), {})
        assert not started.done and started.rest is not None
        group.start_soon(wake)
        assert await started.rest == ("inside", "woken")
    assert WHO.get() == "caller"


async def test_a_suspended_attempt_is_cancelled_with_its_task() -> None:
    event = anyio.Event()
    with anyio.move_on_after(0.01) as scope:
        started = start(_suspending, (event,), {})
        assert started.rest is not None
        await started.rest
    assert scope.cancelled_caught


SEEN: list[tuple[str, str]] = []
"""``(key, WHO before the task set it)`` per attempt of the tasks below."""


@task(name="t.eager.mixed", queue="t.eager-tasks")
async def mixed(key: str, pause: bool) -> None:
    SEEN.append((key, WHO.get()))
    WHO.set(key)  # never seen by the next attempt of the batch
    if pause:
        await anyio.sleep(0.01)
        assert WHO.get() == key


async def _drain(aq: AsyncQuerator, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> None:
    """Defer ``calls`` of :func:`mixed`, then run a worker until they are all done."""
    SEEN.clear()
    await mixed.defer_many_async(aq, calls)
    worker = AsyncWorker(aq, [mixed], concurrency=8, poll_timeout=0.5, scheduler=False)
    async with anyio.create_task_group() as group:
        group.start_soon(worker.arun)
        with anyio.fail_after(30):
            while (await aq.stats("t.eager-tasks")).total:
                await anyio.sleep(0.02)
        worker.stop()
    assert sorted(key for key, _ in SEEN) == sorted(f"k{i}" for i in range(len(calls)))
    assert {who for _, who in SEEN} == {"-"}


async def test_a_worker_runs_a_batch_of_quick_and_suspending_attempts_each_once(
    aq: AsyncQuerator,
) -> None:
    await _drain(aq, [((f"k{i}", i % 3 == 1), {}) for i in range(40)])


async def test_quick_attempts_are_completed_a_batch_at_a_time(aq: AsyncQuerator) -> None:
    sizes: list[int] = []
    complete, lease = aq.complete, aq.lease

    leasing_now: list[bool] = []

    async def counted(queue: str, items: Any) -> None:
        if not leasing_now:  # a store that completes before a lease calls this
            sizes.append(len(items))
        await complete(queue, items)

    async def leasing(queue: str, **options: Any) -> list[Leased]:
        if options.get("complete"):
            sizes.append(len(options["complete"]))
        leasing_now.append(True)
        try:
            return await lease(queue, **options)
        finally:
            leasing_now.pop()

    aq.complete = counted  # type: ignore[method-assign]
    aq.lease = leasing  # type: ignore[method-assign]
    await _drain(aq, [((f"k{i}", False), {}) for i in range(40)])
    assert sum(sizes) == 40
    assert len(sizes) <= 10  # batches of the leases' size (8), not one call per item
