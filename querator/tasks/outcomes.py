"""An attempt's outcome stored in one statement: the item completed (with its
result record, when kept), retried later, deferred (completed and produced
again, due later) or dead-lettered with the reason (and its last traceback).
"""

from __future__ import annotations

import logging
import traceback
from datetime import timedelta
from typing import Any

from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.dead_reasons import MAX_REASON, marked
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.tasks.completions import Completions
from querator.tasks.layout import (
    DEAD_SETTINGS,
    PRIOR_HEADER,
    RESULTS_SETTINGS,
    TASK_DEAD_QUEUE,
    TaskRecord,
    prior_attempts,
    record_item,
)
from querator.tasks.layout import TASK_RESULTS_QUEUE as RESULTS
from querator.tasks.spec import TaskSpec
from querator.workflows.errors import Defer
from querator.workflows.retry import RetryDecision

__all__ = ["TRACEBACK_LIMIT", "Outcomes"]

log = logging.getLogger("querator.tasks")

TRACEBACK_LIMIT = 8192
"""Characters of a failure's traceback kept in its result record (the end)."""


class Outcomes:
    """Stores the outcomes of the attempts run on ``aq`` (successes without a
    kept result through ``completions``, together)."""

    def __init__(self, aq: AsyncQueueClient, completions: Completions) -> None:
        self._aq = aq
        self._completions = completions

    async def store(
        self, current: Leased, fn: TaskSpec[..., Any], attempt: int, outcome: Any
    ) -> None:
        """One statement for the attempt's outcome."""
        if isinstance(outcome, Defer):
            await self.defer(current, attempt, outcome)
        elif isinstance(outcome, BaseException):
            await self._failed(current, fn, attempt, outcome)
        elif not fn.keep_result:
            await self._completions.complete(current)
        else:
            try:
                text = fn.codec.encode_result(outcome)
            except InvalidArgument as exc:
                await self._failed(current, fn, attempt, exc, retry=False)
                return
            record = TaskRecord(task=fn.name, ok=True, result=text, attempts=attempt)
            items = [record_item(current.reference, record)]
            await self._transact(current, {RESULTS: items})

    async def defer(self, current: Leased, attempt: int, defer: Defer) -> None:
        """Complete the item and produce its next one, due later (the deferring
        attempt does not count against the retry policy)."""
        later = Item(
            payload=current.payload,
            kind=current.kind,
            encoding=current.encoding,
            reference=current.reference,
            headers={**current.headers, PRIOR_HEADER: str(attempt - 1)},
            enqueue_at=self._aq.clock.now() + timedelta(seconds=defer.seconds),
            priority=current.priority,
        )
        log.info("task %s %s deferred by %.3fs", current.kind, current.reference, defer.seconds)
        await self._transact(current, {current.queue: [later]})

    async def _failed(
        self,
        current: Leased,
        fn: TaskSpec[..., Any],
        attempt: int,
        error: BaseException,
        retry: bool = True,
    ) -> None:
        decision = fn.retry.decide(error, attempt) if retry else RetryDecision(retry=False)
        log.log(
            logging.WARNING if decision.retry else logging.ERROR,
            "task %s %s attempt %d failed (%r); %s",
            fn.name,
            current.reference,
            attempt,
            error,
            f"retry in {decision.delay:.3f}s" if decision.retry else "giving up",
            exc_info=error,
        )
        if decision.retry:
            retry_at = self._aq.clock.now() + timedelta(seconds=decision.delay)
            await self._aq.retry(current.queue, [current], retry_at=retry_at)
            return
        text = "".join(traceback.format_exception(error))[-TRACEBACK_LIMIT:]
        head = f"{type(error).__qualname__}: {error} (attempt {attempt}, giving up)\n"
        reason = head + text[-max(0, MAX_REASON - len(head)) :]
        extra: dict[str, list[Item]] = {}
        if fn.keep_result:
            record = TaskRecord(
                task=fn.name,
                ok=False,
                error_type=type(error).__qualname__,
                message=str(error),
                traceback=text,
                attempts=attempt,
            )
            extra[RESULTS] = [record_item(current.reference, record)]
        await self.dead(current, reason, extra)

    async def dead(
        self, current: Leased, reason: str, extra: dict[str, list[Item]] | None = None
    ) -> None:
        """Complete the item and put its dead letter in its queue's dead queue
        (``extra``: more to produce in the same transaction)."""
        dead = (await self._aq.queue_info(current.queue)).settings.dead_queue or TASK_DEAD_QUEUE
        letter = Item(
            payload=current.payload,
            kind=current.kind,
            encoding=current.encoding,
            reference=current.reference,
            headers=marked(
                {k: v for k, v in current.headers.items() if k != PRIOR_HEADER},
                prior_attempts(current.headers) + current.attempts,
                reason[:MAX_REASON],
                current.queue,
            ),
        )
        log.error(
            "task item %s of %s dead-lettered to %s: %s",
            current.id,
            current.queue,
            dead,
            reason.splitlines()[0],
        )
        await self._transact(current, {dead: [letter], **(extra or {})})

    async def _transact(self, current: Leased, produce: dict[str, list[Item]]) -> None:
        """Complete ``current`` and produce, in one transaction (creating the
        results or dead queue first if someone deleted it)."""
        try:
            await self._aq.transact(complete=[current], produce=produce)
        except QueueNotFound:
            await self._aq.create_queue(RESULTS, RESULTS_SETTINGS, exist_ok=True)
            await self._aq.create_queue(TASK_DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
            await self._aq.transact(complete=[current], produce=produce)
