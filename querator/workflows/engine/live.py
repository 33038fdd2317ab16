"""Live bodies kept by a worker between their steps, at most ``limit``, evicted
least recently used.

A :class:`LiveRun` is a run's body parked in its fiber on a request whose
items are committed (a step item, a timer, a child run): whoever brings the
outcome resumes it, nothing is replayed. Each run has a lock: one task at a
time resumes or replays it in this worker. Eviction tears a body down on the
worker's loop, in the body's own context (:meth:`Fiber.close`), and only while
nobody holds its lock; an evicted run simply replays on its next item.
"""

from __future__ import annotations

import contextvars
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from querator.workflows.engine.context import CURRENT, Request, RunContext
from querator.workflows.engine.fiber import Fiber
from querator.workflows.functions import WorkflowFunction
from querator.workflows.stored import RunMeta

__all__ = ["DEFAULT_MAX_LIVE_RUNS", "LiveRun", "LiveRuns", "body_fiber"]

log = logging.getLogger("querator.workflows")

DEFAULT_MAX_LIVE_RUNS = 1000
"""Live bodies a worker keeps by default (``Worker(max_live_runs=...)``)."""


def body_fiber(wf: WorkflowFunction[..., Any], ctx: RunContext, args_text: str) -> Fiber:
    """A fiber that runs ``wf``'s body with ``ctx`` as its :data:`CURRENT` run."""

    def target() -> Any:
        CURRENT.set(ctx)
        args, kwargs = wf.codec.decode_args(args_text)
        return wf.fn(*args, **kwargs)

    context = contextvars.copy_context()
    return Fiber(target, context)


@dataclass(eq=False)
class LiveRun:
    """One run's body, live in this worker."""

    run_id: str
    wf: WorkflowFunction[..., Any]
    meta: RunMeta
    ctx: RunContext
    fiber: Fiber
    request: Request | None = None
    """What the body is parked on, once committed (None: not committed yet)."""

    async def close(self) -> None:
        """Tear the body down (its ``finally`` blocks run now, in its context)."""
        self.ctx.closed = True
        await self.fiber.close()


class LiveRuns:
    """The live bodies of one worker, with a lock per run."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._runs: OrderedDict[str, LiveRun] = OrderedDict()
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}
        self.evicted = 0
        """Bodies torn down to stay within ``limit`` (shutdown excluded)."""

    def __len__(self) -> int:
        return len(self._runs)

    @asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        """Hold ``run_id``'s lock: only the holder resumes, replays or drops its body."""
        lock, users = self._locks.get(run_id, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[run_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[run_id]
            if users == 1:
                del self._locks[run_id]
            else:
                self._locks[run_id] = (lock, users - 1)

    def busy(self, run_id: str) -> bool:
        """Whether another task holds (or waits for) ``run_id``'s lock."""
        return run_id in self._locks

    def get(self, run_id: str) -> LiveRun | None:
        """The run's live body (the caller holds its lock), now most recently used."""
        live = self._runs.get(run_id)
        if live is not None:
            self._runs.move_to_end(run_id)
        return live

    def peek(self, run_id: str) -> LiveRun | None:
        """The run's live body, if any, left where it is in the eviction order
        (to look at what it is parked on; no lock needed)."""
        return self._runs.get(run_id)

    def keep(self, live: LiveRun) -> None:
        """Keep ``live`` (parked on a committed request; the caller holds its lock)."""
        self._runs[live.run_id] = live
        self._runs.move_to_end(live.run_id)

    async def drop(self, live: LiveRun) -> None:
        """Forget and tear down ``live`` (the caller holds its lock)."""
        if self._runs.get(live.run_id) is live:
            del self._runs[live.run_id]
        await live.close()

    async def trim(self) -> None:
        """Evict least recently used bodies beyond ``limit`` (skipping held ones)."""
        if len(self._runs) <= self.limit:
            return
        for run_id in list(self._runs):
            if len(self._runs) <= self.limit:
                return
            if run_id in self._locks:
                continue  # somebody is resuming it or waiting to
            live = self._runs.pop(run_id)
            self.evicted += 1
            async with self.hold(run_id):
                await live.close()

    async def close_all(self) -> None:
        """Tear every body down (the worker stops)."""
        while self._runs:
            run_id, live = self._runs.popitem(last=False)
            async with self.hold(run_id):
                await live.close()
