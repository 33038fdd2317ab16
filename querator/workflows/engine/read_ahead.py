"""Reading ahead of a send's wake task: a body parked on ``recv``, live in this
worker, looks up the run's state and the message it will read as soon as the
send's wakeup arrives (:func:`~.mailbox.sent_wake`), while the worker leases
the wake task, so that the wake stores what ``recv`` read one round trip
sooner.

What was read ahead serves only the wake task that send made due (its dedup key
is in the wakeup): the send committed before its wakeup was sent, so what was
read after the wakeup is as recent as what that wake task would read after its
lease. Any other wake of the run (a cancel request, the timeout, another send)
looks up again. Nothing is written ahead: the record of what ``recv`` read is
stored by the wake, fenced by its lease, as always (:func:`.reading.store_read`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from querator.queue.models import Leased, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.context import Recv, WaitEvent
from querator.workflows.engine.live import LiveRun, LiveRuns
from querator.workflows.engine.mailbox import SENT_WAKE, sent_wake_of
from querator.workflows.engine.reading import Ahead

__all__ = ["ReadAheads", "State"]

log = logging.getLogger("querator.workflows")

State = tuple[dict[str, StoredItem], Ahead]
"""What a wake of a body parked on ``recv`` looks up: the run's records that
decide whether it resumes (its result, a cancel request, ...) by key, and the
message it would read."""


@dataclass(eq=False)
class _Pending:
    """One read ahead, under way or done."""

    live: LiveRun
    request: Recv
    wake_key: str
    """The dedup key of the wake task it serves."""
    done: anyio.Event = field(default_factory=anyio.Event)
    got: State | None = None
    """None: it failed (the wake looks up again)."""


class ReadAheads:
    """The reads ahead of one worker's engine: at most one per run, and no more
    than the live bodies it keeps. ``look`` looks up a body's :data:`State`."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        live: LiveRuns,
        look: Callable[[LiveRun, Recv], Awaitable[State]],
    ) -> None:
        self._aq = aq
        self._live = live
        self._look = look
        self._pending: dict[str, _Pending] = {}
        self._spawn: Callable[..., object] | None = None
        self._unhook: Callable[[], None] | None = None

    def serve(self, group: TaskGroup) -> None:
        """Read ahead, in tasks of ``group``, on each send's wakeup until :meth:`stop`."""
        self._spawn = group.start_soon
        self._unhook = self._aq.on_wakeup(SENT_WAKE, self._sent)

    def stop(self) -> None:
        """Start no more reads ahead (the worker stops)."""
        self._spawn = None
        if self._unhook is not None:
            self._unhook()
            self._unhook = None

    def _sent(self, wakeup: str) -> None:
        sent = sent_wake_of(wakeup)
        if sent is None or self._spawn is None:
            return
        run_id, wake_key = sent
        known = self._pending.get(run_id)
        if known is not None and known.wake_key == wake_key:
            return  # heard twice (the sender's own client wakes locally too)
        live = self._live.peek(run_id)
        if live is None or not isinstance(live.request, Recv):
            return  # not live here, or not waiting for a message
        pending = _Pending(live, live.request, wake_key)
        self._pending.pop(run_id, None)
        self._pending[run_id] = pending
        while len(self._pending) > max(1, self._live.limit):
            del self._pending[next(iter(self._pending))]
        try:
            self._spawn(self._read, pending)
        except RuntimeError:  # the group has ended (the worker failed): no more
            del self._pending[run_id]
            self.stop()

    async def _read(self, pending: _Pending) -> None:
        try:
            pending.got = await self._look(pending.live, pending.request)
        except Exception:
            log.debug("run %s: reading ahead failed", pending.live.run_id, exc_info=True)
        finally:
            pending.done.set()

    async def take(self, live: LiveRun, request: Recv | WaitEvent, wake: Leased) -> State | None:
        """What was read ahead for ``live`` parked on ``request``, woken by ``wake``
        (waiting for the read under way); None: nothing for this wake (look up now)."""
        pending = self._pending.get(live.run_id)
        if (
            pending is None
            or pending.live is not live
            or pending.request != request
            or pending.wake_key != wake.dedup_key
        ):
            return None
        del self._pending[live.run_id]
        await pending.done.wait()
        return pending.got
