"""The HTTP clients' dead-letter methods: ``/v1/dead.*`` from Python.

Same names, arguments and semantics as :mod:`querator.queue.dead_letters`
(``dead_letters``, ``requeue``, ``purge``), the client in place of the first
argument, plus ``dead_letter`` (one dead letter, ``querator dead show``).
:class:`AsyncDeadCalls` is mixed into :class:`querator.http.AsyncQuerator`,
:class:`DeadCalls` into :class:`querator.http.Querator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from querator.http.bodies import stored_of
from querator.http.callers import LoopOwner, Poster
from querator.http.wire import workflows as ww
from querator.queue.dead_letters import MAX_LIMIT
from querator.queue.models import StoredItem
from querator.queue.validation import check_count, check_name, check_sequence

T = TypeVar("T")


def _ids(ids: Sequence[str] | None) -> list[str] | None:
    if ids is None:
        return None
    check_sequence("ids", ids, "dead letter ids")
    return list(ids)


class AsyncDeadCalls:
    """Dead letters of a queue over HTTP (see :mod:`querator.queue.dead_letters`)."""

    async def dead_letters(self: Poster, queue: str, limit: int | None = None) -> list[StoredItem]:
        """See :func:`querator.queue.dead_letters.dead_letters_async`: the dead
        letters of ``queue``, in the order they arrived (at most ``limit``)."""
        body: dict[str, Any] = {"queue_name": check_name("queue", queue), "limit": None}
        if limit is not None:
            body["limit"] = check_count("limit", limit, 1, MAX_LIMIT)
        reply = await self._post("/v1/dead.list", body, ww.DeadListReply)
        return [stored_of(item) for item in reply.items]

    async def dead_letter(self: Poster, queue: str, item_id: str) -> StoredItem:
        """One dead letter of ``queue``, in full; InvalidArgument when ``item_id``
        is not one."""
        body = {"queue_name": check_name("queue", queue), "id": item_id}
        return stored_of(await self._post("/v1/dead.show", body, ww.DeadLetter))

    async def requeue(self: Poster, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.requeue_async`: send dead
        letters back to ``queue`` (``ids``, or all); how many were sent."""
        body = {"queue_name": check_name("queue", queue), "ids": _ids(ids)}
        return (await self._post("/v1/dead.requeue", body, ww.CountReply)).count

    async def purge(self: Poster, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.purge_async`: delete dead
        letters of ``queue`` (``ids``, or all); how many were deleted."""
        body = {"queue_name": check_name("queue", queue), "ids": _ids(ids)}
        return (await self._post("/v1/dead.purge", body, ww.CountReply)).count


class DeadCalls:
    """The sync twins of :class:`AsyncDeadCalls`, run on the client's loop."""

    def dead_letters(self: LoopOwner, queue: str, limit: int | None = None) -> list[StoredItem]:
        """See :meth:`AsyncDeadCalls.dead_letters`."""
        found: list[StoredItem] = self.call(self.aio.dead_letters, queue, limit)
        return found

    def dead_letter(self: LoopOwner, queue: str, item_id: str) -> StoredItem:
        """See :meth:`AsyncDeadCalls.dead_letter`."""
        item: StoredItem = self.call(self.aio.dead_letter, queue, item_id)
        return item

    def requeue(self: LoopOwner, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :meth:`AsyncDeadCalls.requeue`."""
        count: int = self.call(self.aio.requeue, queue, ids)
        return count

    def purge(self: LoopOwner, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :meth:`AsyncDeadCalls.purge`."""
        count: int = self.call(self.aio.purge, queue, ids)
        return count
