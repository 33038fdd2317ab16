"""Running task items in a worker: one attempt under a kept lease, then one
statement for its outcome (complete; retry later; defer; dead-letter).

A task item is never dropped: what cannot run (arguments that no longer fit,
a task this worker does not know, attempts used up by workers that died
mid-task) goes to the dead queue with the reason, a failure for good with its
last traceback.
"""

from __future__ import annotations

import functools
import logging
import time
import traceback
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import anyio

from querator.errors import Conflict, InvalidArgument, QueueNotFound
from querator.limits.admission import Entry, Limited, Limits
from querator.queue.dead_reasons import MAX_REASON, marked
from querator.queue.harness.renewal import Kept, Renewer
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.tasks import parking
from querator.tasks.completions import Completions
from querator.tasks.errors import TaskTimeout
from querator.tasks.layout import (
    DEAD_SETTINGS,
    PRIOR_HEADER,
    RESULTS_SETTINGS,
    TASK_DEAD_QUEUE,
    TaskRecord,
    prior_attempts,
    record_item,
    task_name,
)
from querator.tasks.layout import TASK_RESULTS_QUEUE as RESULTS
from querator.tasks.spec import TaskSpec, registered_task
from querator.tasks.threads import SyncCalls
from querator.workflows.errors import Defer
from querator.workflows.retry import RetryDecision

__all__ = ["TaskRunner"]

log = logging.getLogger("querator.tasks")

TRACEBACK_LIMIT = 8192
"""Characters of a failure's traceback kept in its result record (the end)."""


class TaskRunner:
    """Runs the task items one worker leases (``tasks``: the tasks it serves)."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        renewer: Renewer,
        tasks: Mapping[str, TaskSpec[..., Any]],
        client_id: str = "querator-worker",
    ) -> None:
        self.aq = aq
        self.renewer = renewer
        self.tasks = tasks
        self.limits = Limits(aq, renewer, client_id)
        """The tasks' concurrency and rate limits."""
        self._running: dict[str, Kept] = {}
        """The leases of the attempts running now, by item id (see :meth:`release`)."""
        self.threads = SyncCalls()
        """Runs the sync task functions (:meth:`close` ends its threads)."""
        self.completions = Completions(aq)
        """Completes the items whose attempt succeeded, together (one statement a bunch)."""

    def close(self) -> None:
        """End the threads of the sync tasks (once their calls are done)."""
        self.threads.close()

    def find(self, name: str) -> TaskSpec[..., Any] | None:
        """The task to run for items named ``name`` (served, or defined here)."""
        return self.tasks.get(name) or registered_task(name)

    async def run(self, leased: Leased) -> None:
        """One attempt of the task ``leased`` holds, and its outcome stored."""
        name = task_name(leased.kind)
        fn = self.find(name)
        if fn is None:
            await self._dead(leased, f"no task {name!r} is defined in the worker that leased it")
            return
        attempt = prior_attempts(leased.headers) + leased.attempts
        limit = fn.retry.max_attempts
        if limit and attempt > limit:
            reason = (
                f"attempt {attempt} of task {name!r}, which allows {limit}: an earlier"
                " attempt's worker stopped without finishing (its lease expired)"
            )
            await self._dead(leased, reason)
            return
        try:
            args, kwargs = _decode(fn, leased.payload)
        except InvalidArgument as exc:
            await self._dead(leased, f"task {name!r}: {exc}")
            return
        entry = await self._enter(leased, fn, args, kwargs)
        if entry is None:
            return
        if entry.defer is not None:
            await self._defer(leased, attempt, Defer(entry.defer))
            return
        log.debug("task %s %s: attempt %d", name, leased.reference, attempt)
        try:
            current, outcome = await self._attempt(leased, fn, args, kwargs)
        finally:
            await self.limits.leave(entry)
        try:
            await self._store(current, fn, attempt, outcome)
        except Conflict as exc:
            log.warning("task %s %s lost its lease: outcome dropped (%s)", name, leased.id, exc)

    async def _enter(
        self, leased: Leased, fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Entry | None:
        """Take what ``leased`` needs under its task's limits (None: parked)."""
        if fn.concurrency is None and fn.rate_limit is None:
            return Entry()
        try:
            concurrency_key, rate_key = fn.limit_keys(args, kwargs)
        except InvalidArgument as exc:
            await self._dead(leased, f"task {fn.name!r}: {exc}")
            return None
        limited = Limited(
            owner=fn.name,
            concurrency=fn.concurrency,
            rate_limit=fn.rate_limit,
            concurrency_key=concurrency_key,
            rate_key=rate_key,
            parked_key=f"{leased.reference}/park",
            parked_before=PRIOR_HEADER in leased.headers,
        )

        async def park(semaphore: str, lease: float) -> None:
            await parking.park(self.aq, self.limits.gate, semaphore, leased, lease, limited)

        return await self.limits.enter(leased, limited, park)

    async def _attempt(
        self, leased: Leased, fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> tuple[Leased, Any]:
        """Run ``fn`` once under a kept lease: its latest version, and the result
        or the exception."""
        queue_timeout = (await self.aq.queue_info(leased.queue)).settings.lease_timeout
        extend = fn.lease_timeout or queue_timeout
        if fn.lease_timeout is not None:
            [leased] = await self.aq.renew(leased.queue, [leased], extend=extend)
        kept = self.renewer.keep(leased, extend, min(extend, queue_timeout) / 3)
        self._running[leased.id] = kept
        outcome: Any
        try:
            outcome = await _call(fn, args, kwargs, self.threads)
        except Exception as exc:
            outcome = exc
        finally:
            self._running.pop(leased.id, None)
            current = await self.renewer.release(kept)
        return current, outcome

    async def release(self, item_id: str) -> bool:
        """Give the item of a running attempt back (a worker stopping past its
        grace period): leasable by other workers at once, this attempt counted.
        True when released or found finished; False when no attempt of it runs."""
        kept = self._running.get(item_id)
        if kept is None:
            return False
        try:
            await self.aq.retry(kept.current.queue, [kept.current])
        except Conflict:
            return True  # finished (or lost) meanwhile: nothing to release
        except Exception:
            log.exception("could not release task item %s: its lease will expire", item_id)
            return False
        log.info("task item %s (%s) released", item_id, kept.current.kind)
        return True

    async def _store(
        self, current: Leased, fn: TaskSpec[..., Any], attempt: int, outcome: Any
    ) -> None:
        """One statement for the attempt's outcome."""
        if isinstance(outcome, Defer):
            await self._defer(current, attempt, outcome)
        elif isinstance(outcome, BaseException):
            await self._failed(current, fn, attempt, outcome)
        elif not fn.keep_result:
            await self.completions.complete(current)
        else:
            try:
                text = fn.codec.encode_result(outcome)
            except InvalidArgument as exc:
                await self._failed(current, fn, attempt, exc, retry=False)
                return
            record = TaskRecord(task=fn.name, ok=True, result=text, attempts=attempt)
            items = [record_item(current.reference, record)]
            await self._transact(current, {RESULTS: items})

    async def _defer(self, current: Leased, attempt: int, defer: Defer) -> None:
        """Complete the item and produce its next one, due later (the deferring
        attempt does not count against the retry policy)."""
        later = Item(
            payload=current.payload,
            kind=current.kind,
            encoding=current.encoding,
            reference=current.reference,
            headers={**current.headers, PRIOR_HEADER: str(attempt - 1)},
            enqueue_at=self.aq.clock.now() + timedelta(seconds=defer.seconds),
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
            retry_at = self.aq.clock.now() + timedelta(seconds=decision.delay)
            await self.aq.retry(current.queue, [current], retry_at=retry_at)
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
        await self._dead(current, reason, extra)

    async def _dead(
        self, current: Leased, reason: str, extra: dict[str, list[Item]] | None = None
    ) -> None:
        """Complete the item and put its dead letter in its queue's dead queue
        (``extra``: more to produce in the same transaction)."""
        dead = (await self.aq.queue_info(current.queue)).settings.dead_queue or TASK_DEAD_QUEUE
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
            await self.aq.transact(complete=[current], produce=produce)
        except QueueNotFound:
            await self.aq.create_queue(RESULTS, RESULTS_SETTINGS, exist_ok=True)
            await self.aq.create_queue(TASK_DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
            await self.aq.transact(complete=[current], produce=produce)


def _decode(fn: TaskSpec[..., Any], payload: bytes) -> tuple[tuple[Any, ...], Any]:
    """The call's arguments, checked against the signature; InvalidArgument if
    they do not decode or fit."""
    try:
        args, kwargs = fn.codec.decode_call(payload.decode())
    except InvalidArgument:
        raise
    except Exception as exc:
        raise InvalidArgument("arguments", f"do not fit its signature: {exc}") from exc
    return args, kwargs


async def _call(
    fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: Any, threads: SyncCalls
) -> Any:
    """One attempt; :class:`TaskTimeout` when it outlives ``fn.timeout``."""
    timeout = fn.timeout
    if fn.is_async:
        if timeout is None:  # no cancel scope to pay for
            return await fn.fn(*args, **kwargs)
        try:
            with anyio.fail_after(timeout):
                return await fn.fn(*args, **kwargs)
        except TimeoutError as exc:
            raise TaskTimeout(f"task {fn.name!r} was cancelled after {timeout}s") from exc
    began = time.monotonic()
    value = await threads.run(functools.partial(fn.fn, *args, **kwargs))
    took = time.monotonic() - began
    if timeout is not None and took > timeout:
        raise TaskTimeout(f"task {fn.name!r} took {took:.3f}s, over its {timeout}s timeout")
    return value
