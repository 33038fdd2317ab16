"""Running task items in a worker: one attempt under a kept lease, then one
statement for its outcome (:mod:`querator.tasks.outcomes`: complete; retry
later; defer; dead-letter). A leased batch of async tasks runs from one task
of the event loop (:meth:`TaskRunner.run_batch`), each attempt started at
once (:mod:`querator.tasks.eager`).

A task item is never dropped: what cannot run (arguments that no longer fit,
a task this worker does not know, attempts used up by workers that died
mid-task) goes to the dead queue with the reason, a failure for good with its
last traceback.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import anyio
from anyio.abc import TaskGroup

from querator.errors import Conflict, InvalidArgument
from querator.limits.admission import Entry, Limited, Limits
from querator.queue.harness.renewal import Kept, Renewer
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.tasks import eager, parking
from querator.tasks.completions import Completions
from querator.tasks.errors import TaskTimeout
from querator.tasks.layout import PRIOR_HEADER, TASK_LEASE, prior_attempts, task_name
from querator.tasks.outcomes import Outcomes
from querator.tasks.spec import TaskSpec, registered_task
from querator.tasks.threads import SyncCalls
from querator.workflows.errors import Defer

__all__ = ["Hands", "TaskRunner"]

log = logging.getLogger("querator.tasks")


class _Suspended(NamedTuple):
    """An attempt of a batch that suspended in its first step, and the items after it."""

    leased: Leased
    fn: TaskSpec[..., Any]
    attempt: int
    started: eager.Started
    rest: Sequence[Leased]


@dataclass(frozen=True, slots=True)
class Hands:
    """What a worker lends :meth:`TaskRunner.run_batch`."""

    group: TaskGroup
    """Where items that take longer go on (the worker's items)."""
    alone: Callable[[Leased], Coroutine[Any, Any, None]]
    """Handles one item in a task of its own (the general path)."""
    finished: Callable[[Leased], None]
    """Called for each item handled by ``run_batch`` once it is."""
    more: Callable[[int, list[Leased]], Awaitable[list[Leased]]] | None = None
    """Completes the items given and leases up to ``n`` more in one call (in
    hand once returned; none: stopping, nothing leasable now, or the store
    away after the complete); raises :class:`~querator.errors.Conflict` when
    a lease of them was lost (nothing changed then), or what the complete
    raised. None: the worker leases on its own only."""


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
        self.outcomes = Outcomes(aq, self.completions)
        """Stores the attempts' outcomes."""

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
            await self.outcomes.dead(
                leased, f"no task {name!r} is defined in the worker that leased it"
            )
            return
        attempt = prior_attempts(leased.headers) + leased.attempts
        limit = fn.retry.max_attempts
        if limit and attempt > limit:
            reason = (
                f"attempt {attempt} of task {name!r}, which allows {limit}: an earlier"
                " attempt's worker stopped without finishing (its lease expired)"
            )
            await self.outcomes.dead(leased, reason)
            return
        try:
            args, kwargs = _decode(fn, leased.payload)
        except InvalidArgument as exc:
            await self.outcomes.dead(leased, f"task {name!r}: {exc}")
            return
        entry = await self._enter(leased, fn, args, kwargs)
        if entry is None:
            return
        if entry.defer is not None:
            await self.outcomes.defer(leased, attempt, Defer(entry.defer))
            return
        log.debug("task %s %s: attempt %d", name, leased.reference, attempt)
        try:
            current, outcome = await self._attempt(leased, fn, args, kwargs)
        finally:
            await self.limits.leave(entry)
        try:
            await self.outcomes.store(current, fn, attempt, outcome)
        except Conflict as exc:
            log.warning("task %s %s lost its lease: outcome dropped (%s)", name, leased.id, exc)

    async def run_batch(
        self, batch: Sequence[Leased], hands: Hands, done: list[Leased] | None = None
    ) -> None:
        """Run a leased batch of task items, from one task: each async attempt
        starts at once (:mod:`querator.tasks.eager`), and the attempts that
        finish in that first step are completed together at the end (with
        the lease of as many more in one call, ``hands.more``, if given, run
        the same way). An item that needs more goes on elsewhere: ``hands.alone`` in a task of
        ``hands.group`` (sync tasks, timeouts, limits, anything to
        dead-letter), or a task of its own for its outcome; an attempt that
        suspends goes on in this task and the batch's other items in a new
        one (``done``: items finished already, completed with this batch's)."""
        done = [] if done is None else done
        while True:
            suspended = self._start_each(batch, hands, done)
            if suspended is not None:
                if suspended.rest or done:
                    hands.group.start_soon(self.run_batch, suspended.rest, hands, done)
                await self._go_on(suspended, hands.finished)
                return
            if not done:
                return
            if hands.more is None:
                await self._complete(done, hands.finished)
                return
            try:  # complete them and lease as many more, in one call
                batch = await hands.more(len(done), done)
            except Conflict:  # a lease of them was lost: nothing changed; each alone
                await self._complete(done, hands.finished)
                return
            except Exception:  # the store away: complete them on their own (riding it)
                log.debug("complete with a lease failed; completing alone", exc_info=True)
                await self._complete(done, hands.finished)
                return
            except BaseException:
                for item in done:
                    hands.finished(item)
                raise
            for item in done:
                hands.finished(item)
            done = []
            if not batch:
                return

    def _start_each(
        self, batch: Sequence[Leased], hands: Hands, done: list[Leased]
    ) -> _Suspended | None:
        """Start the attempts of ``batch`` in turn (see :meth:`run_batch`) until
        one suspends: that one and the items after it, returned."""
        index = 0
        try:
            for index, leased in enumerate(batch):
                call = self._eager_call(leased)
                if call is None:
                    hands.group.start_soon(hands.alone, leased)
                    continue
                fn, args, kwargs = call
                attempt = prior_attempts(leased.headers) + leased.attempts
                log.debug("task %s %s: attempt %d", fn.name, leased.reference, attempt)
                started = eager.start(fn.fn, args, kwargs)
                if not started.done:
                    return _Suspended(leased, fn, attempt, started, batch[index + 1 :])
                if fn.keep_result or isinstance(started.outcome, (BaseException, Defer)):
                    outcome = started.outcome
                    hands.group.start_soon(
                        self._outcome, leased, fn, attempt, outcome, hands.finished
                    )
                else:
                    done.append(leased)
        except BaseException:  # KeyboardInterrupt in a task: what is left is not in hand
            for left in [*done, *batch[index:]]:
                hands.finished(left)
            raise
        return None

    def _eager_call(self, leased: Leased) -> tuple[TaskSpec[..., Any], tuple[Any, ...], Any] | None:
        """The task of ``leased`` and its arguments when its attempt may start at
        once (async, no timeout, lease timeout or limits; not past its attempts;
        arguments that decode), else None."""
        fn = self.find(task_name(leased.kind))
        if (
            fn is None
            or not fn.is_async
            or fn.timeout is not None
            or fn.lease_timeout is not None
            or fn.concurrency is not None
            or fn.rate_limit is not None
        ):
            return None
        limit = fn.retry.max_attempts
        if limit and prior_attempts(leased.headers) + leased.attempts > limit:
            return None
        try:
            args, kwargs = _decode(fn, leased.payload)
        except InvalidArgument:
            return None
        return fn, args, kwargs

    async def _go_on(self, suspended: _Suspended, finished: Callable[[Leased], None]) -> None:
        """The rest of an attempt that suspended, under a kept lease, and its outcome."""
        leased, fn, attempt, started, _ = suspended
        try:
            try:
                extend = (await self.aq.queue_info(leased.queue)).settings.lease_timeout
            except Exception:  # the store away: the attempt goes on, renewed by the default
                extend = TASK_LEASE
            kept = self.renewer.keep(leased, extend, extend / 3)
            self._running[leased.id] = kept
            outcome: Any
            try:
                outcome = await cast(Awaitable[Any], started.rest)
            except Exception as exc:
                outcome = exc
            finally:
                self._running.pop(leased.id, None)
                current = await self.renewer.release(kept)
            await self._outcome(current, fn, attempt, outcome, None)
        finally:
            finished(leased)

    async def _outcome(
        self,
        current: Leased,
        fn: TaskSpec[..., Any],
        attempt: int,
        outcome: Any,
        finished: Callable[[Leased], None] | None,
    ) -> None:
        """Store an attempt's outcome (``finished``: called after)."""
        try:
            await self.outcomes.store(current, fn, attempt, outcome)
        except Conflict as exc:
            log.warning("task %s %s lost its lease: outcome dropped (%s)", fn.name, current.id, exc)
        except Exception:
            log.exception("task item %s failed; its lease will expire", current.id)
        finally:
            if finished is not None:
                finished(current)

    async def _complete(self, done: list[Leased], finished: Callable[[Leased], None]) -> None:
        """Complete the items whose attempts finished at once, together."""
        try:
            errors = await self.completions.complete_many(done)
        finally:
            for leased in done:
                finished(leased)
        for leased, error in zip(done, errors, strict=True):
            if isinstance(error, Conflict):
                log.warning("task %s lost its lease: outcome dropped (%s)", leased.id, error)
            elif error is not None:
                log.error(
                    "task item %s not completed (%r); its lease will expire", leased.id, error
                )

    async def _enter(
        self, leased: Leased, fn: TaskSpec[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Entry | None:
        """Take what ``leased`` needs under its task's limits (None: parked)."""
        if fn.concurrency is None and fn.rate_limit is None:
            return Entry()
        try:
            concurrency_key, rate_key = fn.limit_keys(args, kwargs)
        except InvalidArgument as exc:
            await self.outcomes.dead(leased, f"task {fn.name!r}: {exc}")
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
