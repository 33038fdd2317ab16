"""Completing finished task items together: one ``complete`` statement for the
items of a queue that finish at about the same time.

A worker's tasks mostly finish in bunches (a leased batch of quick tasks ends
within one turn of the event loop). The first item to finish leads: it lets
the event loop run once more (a checkpoint, not a timer), so the items
finishing in that same turn join it, then completes them all in one call;
the items finishing while that call is in flight wait for it and go
together in the next. An item alone is delayed by that one turn only.

A batch's complete is all or nothing: when it fails with
:class:`~querator.errors.Conflict` (a lease of the batch was lost: its item
was released or re-leased elsewhere), each item of it is completed again on
its own, so that only the lost one sees the conflict. Any other failure (the
store unreachable) reaches every item of the batch, as it would have reached
each alone: its lease then expires and it runs again, never lost. A caller
cancelled before its batch starts is taken out of it; a leader cancelled
while its statement runs leaves the others
:class:`~querator.errors.Unavailable` (the outcome unknown, as when a
connection breaks mid-commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from anyio.lowlevel import checkpoint

from querator.errors import Conflict, Unavailable
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH

__all__ = ["Completions"]


@dataclass(eq=False, slots=True)
class _Finished:
    leased: Leased
    done: bool = False
    alone: bool = False
    """Its batch lost a lease: complete it again on its own."""
    error: BaseException | None = None


class _Queue:
    """The items of one queue waiting to be completed, and the batch in flight."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.waiting: list[_Finished] = []
        self.running: anyio.Event | None = None
        """Set when the batch in flight ends (None: nothing in flight)."""


class Completions:
    """Completes leased items of ``aq`` in batches (see the module doc)."""

    def __init__(self, aq: AsyncQueueClient) -> None:
        self._aq = aq
        self._queues: dict[str, _Queue] = {}

    async def complete(self, leased: Leased) -> None:
        """Complete ``leased`` (with the items finishing about now); raises what
        its own complete would (:class:`~querator.errors.Conflict` when its
        lease was lost)."""
        [error] = await self.complete_many([leased])
        if error is not None:
            raise error

    async def complete_many(self, items: Sequence[Leased]) -> list[BaseException | None]:
        """Complete ``items`` (of one queue) with the items finishing about now;
        what each one's own complete would raise, in order (None: completed)."""
        queue = self._queues.get(items[0].queue)
        if queue is None:
            queue = self._queues[items[0].queue] = _Queue()
        mine = [_Finished(leased) for leased in items]
        queue.waiting.extend(mine)
        try:
            while not all(me.done for me in mine):
                if queue.running is None:
                    await self._lead(queue)
                else:
                    await queue.running.wait()
        except BaseException:
            queue.waiting = [other for other in queue.waiting if other not in mine]
            raise
        errors: list[BaseException | None] = []
        for me in mine:
            if me.alone and me.error is None:
                try:
                    await self._aq.complete(me.leased.queue, [me.leased])
                except Exception as exc:
                    me.error = exc
            errors.append(me.error)
        return errors

    async def _lead(self, queue: _Queue) -> None:
        running = queue.running = anyio.Event()
        batch: list[_Finished] = []
        try:
            await checkpoint()  # the items finishing in this turn of the loop join
            batch, queue.waiting = queue.waiting[:MAX_BATCH], queue.waiting[MAX_BATCH:]
            if batch:
                await self._commit(batch)
        except BaseException:
            interrupted = Unavailable("a batched complete was interrupted; its outcome is unknown")
            for finished in batch:
                if not finished.done:
                    finished.error = interrupted
                    finished.done = True
            raise
        finally:
            queue.running = None
            running.set()

    async def _commit(self, batch: list[_Finished]) -> None:
        first = batch[0].leased
        try:
            await self._aq.complete(first.queue, [finished.leased for finished in batch])
        except Conflict as exc:
            for finished in batch:
                if len(batch) > 1:
                    finished.alone = True
                else:
                    finished.error = exc
        except Exception as exc:
            for finished in batch:
                finished.error = exc
        for finished in batch:
            finished.done = True
