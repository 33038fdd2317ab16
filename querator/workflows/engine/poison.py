"""Items a worker cannot handle (poison): decoded or dead-lettered, never dropped."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from querator.errors import Conflict
from querator.queue.dead_reasons import clean_reason, marked
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import transact_creating
from querator.workflows.errors import WorkflowError
from querator.workflows.keys import DEAD_QUEUE
from querator.workflows.stored import StepPayload, WakePayload

__all__ = ["Poison", "decode", "discard"]

log = logging.getLogger("querator.worker")


class Poison(WorkflowError):
    """An item this worker cannot handle: dead-letter it (or drop it)."""


async def discard(aq: AsyncQueueClient, leased: Leased, reason: str) -> None:
    """Move a poison item to its queue's dead queue (querator's own when its
    queue has none), in the transaction that completes it."""
    try:
        info = await aq.get_queue(leased.queue)
        if info.settings.dead_queue:
            await aq.retry(leased.queue, [leased], dead=True, reason=reason)
            where = info.settings.dead_queue
        else:  # a queue made without one: the item moves to querator's own
            copy = Item(
                payload=leased.payload,
                kind=leased.kind,
                encoding=leased.encoding,
                reference=leased.reference,
                headers=marked(leased.headers, leased.attempts, clean_reason(reason), leased.queue),
            )
            await transact_creating(aq, [leased], {DEAD_QUEUE: [copy]})
            where = DEAD_QUEUE
        log.error("poison item %s of %s moved to %s: %s", leased.id, leased.queue, where, reason)
    except Conflict as exc:
        log.warning("poison item %s: lease lost before discarding: %s", leased.id, exc)


def decode(model: type[StepPayload] | type[WakePayload], leased: Leased) -> Any:
    """The item's payload, or :class:`Poison` when it does not decode."""
    try:
        return model.model_validate_json(leased.payload)
    except ValidationError as exc:
        raise Poison(f"undecodable {leased.kind} payload: {exc.errors()[0]['msg']}") from exc
