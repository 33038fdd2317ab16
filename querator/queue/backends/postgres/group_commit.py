"""Group commit: one-statement transactions of concurrent callers, run together.

A worker commits its steps from many tasks at once. Each :func:`fused.run_fused`
statement costs a round trip and PostgreSQL's fixed cost of a statement and a
commit, whatever it carries, so the transactions that arrive while one is in
flight wait for it and then go together, as one statement: the first of them
to run leads, takes every one waiting (up to :data:`MOST`), and hands each its
result. A caller alone is not delayed: with nothing in flight it leads at once.

Each transaction stays atomic; together they are all or nothing. When a check
of one fails, none is applied and each runs again alone (one fails, the others
commit). A failure of the statement itself (the database went away) reaches
every caller of the group, as it would each of them alone. A caller cancelled
before its group starts is taken out of it. A leader cancelled while its
statement runs (a stopping worker past its grace) interrupts it: every other
caller of the group gets :class:`~querator.errors.Unavailable`, the outcome
unknown, as when a connection breaks mid-commit (their commits name item
versions, so sending them again can never apply twice).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import anyio

from querator.clock import Clock
from querator.errors import Unavailable
from querator.queue.backends.base import TxnPlan
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.fused import run_fused
from querator.queue.backends.postgres.items import Conn
from querator.queue.models import TransactResult

MOST = 64
"""Transactions in one statement, at most."""


@dataclass(eq=False)
class _Waiter:
    plan: TxnPlan
    done: bool = False
    alone: bool = False
    """Its group failed a check: run it again on its own."""
    result: TransactResult | None = None
    error: Exception | None = None


class GroupCommit:
    """Runs :func:`fused.fusable` plans, grouping those that arrive together."""

    def __init__(
        self,
        connect: Callable[[], AbstractAsyncContextManager[Conn]],
        names: stmt.Names,
        clock: Clock,
    ) -> None:
        self._connect = connect
        self._names = names
        self._clock = clock
        self._waiting: list[_Waiter] = []
        self._running: anyio.Event | None = None
        """Set when the group in flight ends (None: nothing in flight)."""

    async def run(self, plan: TxnPlan) -> TransactResult | None:
        """Apply ``plan``; None when a check failed and nothing of it changed
        (the caller then runs it the slow way, which names the failures)."""
        me = _Waiter(plan)
        self._waiting.append(me)
        try:
            while not me.done:
                if self._running is None:
                    await self._lead()
                else:
                    await self._running.wait()
        except BaseException:
            if me in self._waiting:
                self._waiting.remove(me)
            raise
        if me.error is not None:
            raise me.error
        if me.alone:
            async with self._connect() as conn:
                results = await run_fused(conn, self._names, [plan], self._clock.store_now())
            return None if results is None else results[0]
        return me.result

    async def _lead(self) -> None:
        group, self._waiting = self._waiting[:MOST], self._waiting[MOST:]
        running = self._running = anyio.Event()
        try:
            await self._commit(group)
        except BaseException:
            interrupted = Unavailable("a group commit was interrupted; its outcome is unknown")
            for waiter in group:
                if not waiter.done:
                    waiter.error = interrupted
                    waiter.done = True
            raise
        finally:
            self._running = None
            running.set()

    async def _commit(self, group: list[_Waiter]) -> None:
        try:
            async with self._connect() as conn:
                plans = [w.plan for w in group]
                results = await run_fused(conn, self._names, plans, self._clock.store_now())
        except Exception as exc:
            for waiter in group:
                waiter.error = exc
                waiter.done = True
            return
        for number, waiter in enumerate(group):
            waiter.done = True
            if results is not None:
                waiter.result = results[number]
            elif len(group) > 1:
                waiter.alone = True
