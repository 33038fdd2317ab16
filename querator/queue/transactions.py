"""Applying a checked :class:`~.plans.Transaction`: look up the queues it names,
plan and store it (in its telemetry when observed), answer its look-ups, wake
local waiters (:class:`Transactions`, a part of the queue service)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from querator.queue.backends.base import Backend
from querator.queue.models import QueueInfo, TransactResult
from querator.queue.plans import Transaction
from querator.queue.routing import Spreader
from querator.queue.validation import check_name
from querator.queue.waiting import WakeBoard
from querator.telemetry.queue_calls import Carrier, QueueCalls, no_trace
from querator.telemetry.switches import observing


class Transactions:
    """The transactions of one client; ``opened`` returns its backend (or raises
    when the client is closed), ``queue_info`` a queue's cached info."""

    def __init__(
        self,
        opened: Callable[[], Backend],
        queue_info: Callable[[str], Awaitable[QueueInfo]],
        spreader: Spreader,
        calls: QueueCalls,
        board: WakeBoard,
    ) -> None:
        self._opened = opened
        self._queue_info = queue_info
        self._spreader = spreader
        self._calls = calls
        self._board = board

    async def apply(self, request: Transaction) -> TransactResult:
        """Look up the queues ``request`` names, apply it, wake where it made
        something leasable; its ``lookup`` is answered whatever the backend."""
        backend = self._opened()
        names = request.queue_names()
        queues = {name: await self._queue_info(check_name("queue", name)) for name in names}
        for info in list(queues.values()):
            if info.settings.dead_queue:
                queues[info.settings.dead_queue] = await self._queue_info(info.settings.dead_queue)
        # paused queues of produce_leased -> how many items ``produce`` gives them
        paused = {
            name: len(request.produce.get(name, ()))
            for name in request.claimed
            if queues[name].paused
        }
        if paused:
            request = _unclaimed(request, list(paused))

        def store(carrier: Carrier) -> Coroutine[Any, Any, TransactResult]:
            return backend.transact(request.plan(queues, self._spreader, carrier))

        if observing():
            groups, claimed = request.groups, request.claimed
            result = await self._calls.transact(groups, request.produce, claimed, store)
        else:
            result = await backend.transact(request.plan(queues, self._spreader, no_trace))
        lookup = request.lookup
        missing = [name for name in lookup if name not in result.found]
        if missing:
            found = dict(result.found)
            for name in missing:
                held = await backend.lookup(queues[name], lookup[name])
                found[name] = {item.dedup_key: item for item in held if item.dedup_key}
            result = result.model_copy(update={"found": found})
        if paused:
            produced, leased = dict(result.produced), dict(result.leased)
            for name, given in paused.items():
                ids = produced.pop(name, [])
                if given:
                    produced[name] = ids[:given]
                leased[name] = [None] * len(ids[given:])
            result = result.model_copy(update={"produced": produced, "leased": leased})
        for name in request.woken(queues, result):
            self._board.wake(name)
        return result


def _unclaimed(request: Transaction, paused: list[str]) -> Transaction:
    """``request`` with the ``produce_leased`` items of the ``paused`` queues
    produced instead (a paused queue's items are not leased, not even to their
    producer); their ``leased`` entries are None."""
    produce = {name: list(items) for name, items in request.produce.items()}
    for name in paused:
        produce.setdefault(name, []).extend(request.claimed[name])
    claimed = {name: items for name, items in request.claimed.items() if name not in paused}
    return request._replace(produce=produce, claimed=claimed)
