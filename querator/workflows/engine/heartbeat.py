"""A worker's entry in the registry of workers (:mod:`querator.workflows.pollers`),
and its WARNING about items that no live worker serves.

The entry is a record of the results queue (``pollers/{client id}``) the worker
holds leased while it polls: claimed at start, renewed every
:data:`~querator.workflows.pollers.HEARTBEAT` seconds, given back when the
worker stops polling. Every few beats the worker also looks at the heads of
the queues it leases from and logs, once per queue and kind, a WARNING for
items that waited longer than :data:`~querator.workflows.pollers.UNSERVED_GRACE`
seconds while no live worker serves them (routing leaves them in the queue:
see :mod:`querator.workflows.engine.served`), and deletes the entries of
workers gone for :data:`~querator.workflows.pollers.POLLERS_KEPT` seconds, and
purges the finished runs of its workflows past their ``retention`` (a batch per
workflow a sweep; while more are due, sweep after sweep between beats, each
followed by a pause nine times as long as it took: see
:mod:`querator.workflows.retention`),
and prunes the messages of runs that ended more than ``MESSAGE_RETENTION`` ago
(a bounded sweep of the mailbox marks).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

import anyio

from querator.errors import Conflict, QueratorError
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE, RESULTS_SETTINGS
from querator.workflows.pollers import (
    HEARTBEAT,
    POLLER_KIND,
    POLLER_TTL,
    POLLERS_KEPT,
    POLLERS_PREFIX,
    PollerRecord,
    read_pollers,
    unserved_items,
)
from querator.workflows.retention import MessageSweep, sweep_retention_async

__all__ = ["SWEEP_PAUSE", "SWEEP_REST", "Heartbeat", "sweep_pause"]

log = logging.getLogger("querator.worker")

WARN_EVERY = 3
"""Beats between two looks for items nobody serves (one a minute)."""
PROBE = 100
"""Items read from the head of each partition by such a look."""
SWEEP_PAUSE = 0.05
"""Seconds at least between two retention sweeps while finished runs are due: a
backlog is purged batch after batch between beats."""
SWEEP_REST = 9.0
"""While finished runs are due, a sweep that took ``t`` seconds is followed by a
pause of ``SWEEP_REST * t`` (at least :data:`SWEEP_PAUSE`): the store and the
worker's loop are left to others 90% of the time (``docs/benchmarks.md``,
*Retention beside a drain*: on an idle machine a drain beside it kept its rate,
1.05 of a quiet one, against 0.91 with a pause of 4 times the sweep; 56 runs
purged a second)."""
RELEASE_TIMEOUT = 1.0
"""Seconds a stopping worker gives the release of its registry entry (a blocked
store must not hold up its exit: the entry's lease ends by itself)."""


def sweep_pause(took: float, rest: float | None = None) -> float:
    """Seconds to wait after a retention sweep that took ``took`` seconds and
    found runs due, before the next: ``rest`` times it (default :data:`SWEEP_REST`)."""
    return max(SWEEP_PAUSE, (SWEEP_REST if rest is None else rest) * took)


class Heartbeat:
    """Keeps a worker's registry entry live (:meth:`run`) until :meth:`release`."""

    def __init__(
        self,
        aq: AsyncQueueClient,
        client_id: str,
        serves: Callable[[], dict[str, list[str]]],
        queues: Sequence[str],
        retention: Mapping[str, float] | None = None,
    ) -> None:
        self.aq = aq
        self.client_id = client_id
        self._serves = serves
        self._queues = list(queues)
        self._held: Leased | None = None
        self._told: set[tuple[str, str]] = set()
        self._started = aq.clock.now()
        self._retention = dict(retention or {})
        """Seconds each workflow served keeps its finished runs (those with a retention)."""
        self._backlog = False
        """The last sweep purged runs: sweep again, until one purges none."""
        self.messages = MessageSweep()
        """Prunes the messages of ended runs (its ``retention``: seconds after the end)."""

    async def run(self) -> None:
        """Beat until cancelled (the worker stops polling)."""
        beats = 0
        while True:
            try:
                await self._beat()
                if beats % WARN_EVERY == WARN_EVERY - 1:  # not at start: a restart is cheap
                    await self._warn()
                    await self._prune()
                    await self._sweep()
            except QueratorError as exc:  # the store away: the next beat tries again
                log.debug("worker %s: registry heartbeat failed: %s", self.client_id, exc)
            beats += 1
            await self._until(anyio.current_time() + HEARTBEAT)

    async def _until(self, beat_at: float) -> None:
        """Wait for the next beat; while more finished runs are due, purge them
        meanwhile, a batch at a time, :data:`SWEEP_PAUSE` apart."""
        pause = SWEEP_PAUSE
        while self._backlog and anyio.current_time() + pause < beat_at:
            await anyio.sleep(pause)
            began = anyio.current_time()
            try:
                await self._purge_due()
            except QueratorError as exc:  # the store away: the next sweep tries again
                log.debug("worker %s: retention sweep failed: %s", self.client_id, exc)
                break
            pause = sweep_pause(anyio.current_time() - began)
        await anyio.sleep(max(0.0, beat_at - anyio.current_time()))

    async def _beat(self) -> None:
        if self._held is not None:
            try:
                [self._held] = await self.aq.renew(RESULTS_QUEUE, [self._held], extend=POLLER_TTL)
                return
            except Conflict:
                self._held = None  # lost (the process stalled past the TTL): claim it again
        self._held = await self._claim()

    async def _claim(self) -> Leased | None:
        await self.aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        record = PollerRecord(
            client_id=self.client_id, started_at=self._started, serves=self._serves()
        )
        item = Item(
            payload=record.model_dump_json().encode(),
            kind=POLLER_KIND,
            encoding="json",
            dedup_key=POLLERS_PREFIX + self.client_id,
        )
        result = await self.aq.commit(
            produce_leased={RESULTS_QUEUE: [item]},
            client_id=self.client_id,
            silent=(RESULTS_QUEUE,),  # nobody waits for it
        )
        return result.leased.get(RESULTS_QUEUE, [None])[0]

    async def _prune(self) -> None:
        """Delete the entries of workers that stopped more than POLLERS_KEPT ago."""
        oldest = self.aq.clock.now() - timedelta(seconds=POLLERS_KEPT)
        gone = [
            p.item_id for p in await read_pollers(self.aq) if not p.live and p.last_seen < oldest
        ]
        if gone:
            with contextlib.suppress(Conflict):  # another worker pruned them first
                await self.aq.delete_items(RESULTS_QUEUE, gone[:1_000])

    async def _sweep(self) -> None:
        """Purge finished runs past their workflow's retention, a batch at a time,
        and prune the messages of runs ended long enough ago."""
        await self._purge_due()
        pruned = await self.messages.sweep(self.aq)
        if pruned:
            log.debug("worker %s: pruned the messages of %d ended run(s)", self.client_id, pruned)

    async def _purge_due(self) -> None:
        """One retention sweep: a batch of each workflow's runs past retention."""
        if self._retention:
            purged = await sweep_retention_async(self.aq, self._retention)
            self._backlog = purged > 0
            if purged:
                log.debug("worker %s: purged %d finished run(s)", self.client_id, purged)

    async def _warn(self) -> None:
        for unserved in await unserved_items(self.aq, self._queues, limit=PROBE):
            told = (unserved.queue, unserved.kind)
            if told in self._told:
                continue
            self._told.add(told)
            log.warning(
                "%d item(s) of queue %s wait since %s: %s (logged once per name)",
                unserved.items,
                unserved.queue,
                unserved.waiting_since.isoformat(timespec="seconds"),
                unserved.reason,
            )

    async def release(self) -> None:
        """Give the entry back: the registry records when this worker stopped."""
        held, self._held = self._held, None
        if held is None:
            return
        try:
            # bounded: a stopping worker never waits on a blocked store for this
            with anyio.fail_after(RELEASE_TIMEOUT):
                await self.aq.retry(RESULTS_QUEUE, [held])
        except TimeoutError:
            log.debug("worker %s: registry entry not released in time", self.client_id)
        except QueratorError as exc:  # its lease ends within the TTL anyway
            log.debug("worker %s: registry entry not released: %s", self.client_id, exc)
