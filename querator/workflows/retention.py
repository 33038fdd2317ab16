"""Retention of finished runs: purging a run's records, history and index entries.

A finished run (``completed``, ``failed``, ``cancelled``, ``compensated``) is
kept until it is purged: by a worker's maintenance sweep once it ended more than
its workflow's ``retention`` ago (``@workflow(retention=...)``; without one, the
run is kept until the results queue expires it, 366 days), or by an operator
(:func:`purge_runs`, ``querator runs purge``).

Candidates are found through the run index (:mod:`querator.workflows.run_index`):
the entries of a finished status stamped before the cut-off are a range scan,
so a batch costs the same however many runs are stored. A run is purged only if
it ended before the cut-off and nothing still needs it: a child run whose parent
has not ended (the parent reads its result) is kept. A run's records are deleted
from its history's end: its step records first, then, in one transaction, its
meta, result and index entries, so a purge cut short leaves either the whole run
or a run the next purge finishes. The runs of a batch are deleted together
(after a scan of each run's items): all their histories, then their heads and
entries, a run never split between two transactions; so a batch of 100 runs
costs about one round trip per run, not four. Each transaction deletes at most
1,000 items of the results queue, which no worker leases: purging never holds
up leasing.

Messages (:mod:`querator.workflows.engine.mailbox`) are pruned sooner than
their run: a worker's sweep deletes the messages of a run that ended more than
:data:`MESSAGE_RETENTION` ago (read or not), whatever the workflow's
``retention`` (:func:`prune_messages_async`). A running run's messages are
never pruned (a resumed run is running). It finds them through the mailbox
marks (``mailboxes/{run}``) that sends write, a bounded page at a time from a
cursor it carries round, and deletes a run's messages before its mark, so a
sweep cut short is finished by the next. Until then, a resend with the same
idempotency key to the ended run is a no-op; afterwards it is refused with
:class:`~querator.workflows.errors.RunFinished` as any send to an ended run:
neither writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from querator.errors import Conflict, InvalidArgument, QueueNotFound
from querator.queue.client import QueueClient
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count
from querator.workflows.attributes import AttributesRecord, attribute_entry_keys, attributes_prefix
from querator.workflows.engine.mailbox import mailbox_prefix
from querator.workflows.inspection import delete_present_async, run_infos_async
from querator.workflows.keys import (
    MAILBOXES_PREFIX,
    RESULTS_QUEUE,
    meta_key,
    result_key,
)
from querator.workflows.run_index import entry_keys, facet_prefix, parse_entry, since_bound
from querator.workflows.run_models import RunInfo
from querator.workflows.runs import RunStatus
from querator.workflows.stored import RunMeta

__all__ = [
    "FINISHED",
    "MESSAGE_RETENTION",
    "MESSAGE_SWEEP_ITEMS",
    "MESSAGE_SWEEP_SCAN",
    "SWEEP_BATCH",
    "MessageSweep",
    "prune_messages",
    "prune_messages_async",
    "purge_runs",
    "purge_runs_async",
    "sweep_retention_async",
]

FINISHED: tuple[RunStatus, ...] = ("completed", "failed", "cancelled", "compensated")
"""The statuses a run ends with: only runs in one of them are purged."""
SWEEP_BATCH = 100
"""Runs one maintenance sweep purges at most, per workflow."""
_PAGE = 1000
"""Items one scan reads or one delete removes."""
_SCAN = 250
"""Index entries read per scan at most while looking for runs to purge."""
_INDEXED: tuple[RunStatus, ...] = ("running", *FINISHED)
MESSAGE_RETENTION = 86_400.0 * 7
"""Seconds a run's messages are kept after the run ended (then the sweep prunes them)."""
MESSAGE_SWEEP_SCAN = 1_000
"""Mailbox marks one message sweep reads at most."""
MESSAGE_SWEEP_ITEMS = 10_000
"""Messages one message sweep deletes at most (it stops after the run that passes it)."""
"""Statuses a run may have index entries for (a pending saga's are ``running``)."""


def _check_statuses(status: RunStatus | Sequence[RunStatus] | None) -> tuple[RunStatus, ...]:
    if status is None:
        return FINISHED
    wanted = (status,) if isinstance(status, str) else tuple(status)
    for one in wanted:
        if one not in FINISHED:
            raise InvalidArgument(
                "status", f"must be a finished status {FINISHED}, got {str(one)[:40]!r}"
            )
    if not wanted:
        raise InvalidArgument("status", "give at least one finished status")
    return tuple(dict.fromkeys(wanted))


async def purge_runs_async(
    aq: AsyncQueueClient,
    *,
    before: datetime,
    status: RunStatus | Sequence[RunStatus] | None = None,
    workflow: str | None = None,
    limit: int = 1000,
) -> int:
    """Purge up to ``limit`` finished runs that ended before ``before``
    (timezone-aware): their records, history, messages and index entries.
    Only runs with ``status`` (one or several finished statuses; default: every
    finished one) and of ``workflow`` (default: every workflow). Child runs
    whose parent has not ended are kept. Returns how many runs were purged;
    call again while it returns ``limit`` for the rest.
    """
    statuses = _check_statuses(status)
    if before.tzinfo is None or before.utcoffset() is None:
        raise InvalidArgument("before", "must be a timezone-aware datetime")
    if workflow is not None and (not isinstance(workflow, str) or not 1 <= len(workflow) <= 512):
        raise InvalidArgument("workflow", "must be a workflow's name (1 to 512 characters)")
    check_count("limit", limit, 1, 100_000)
    purged = 0
    try:
        for one in statuses:
            if purged < limit:
                purged += await _purge_status(aq, one, workflow, before, limit - purged)
    except QueueNotFound:
        return purged  # no run was ever started in this store
    return purged


async def sweep_retention_async(aq: AsyncQueueClient, retention: Mapping[str, float]) -> int:
    """One maintenance sweep: purge up to :data:`SWEEP_BATCH` runs of each workflow
    in ``retention`` (name: seconds kept after the end). Returns how many runs were
    purged (a full batch: more are due)."""
    now = aq.clock.now()
    purged = 0
    for workflow, seconds in retention.items():
        before = now - timedelta(seconds=seconds)
        purged += await purge_runs_async(aq, before=before, workflow=workflow, limit=SWEEP_BATCH)
    return purged


async def _purge_status(
    aq: AsyncQueueClient, status: RunStatus, workflow: str | None, before: datetime, limit: int
) -> int:
    """Purge up to ``limit`` runs ended before ``before`` from the index of ``status``."""
    prefix = facet_prefix(workflow, status)
    cursor: str | None = since_bound(prefix, before)  # started before: may have ended before
    purged = 0
    while purged < limit:
        # as many entries as runs still wanted: each costs a lookup of its run's head
        wanted = min(_SCAN, limit - purged)
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=cursor, limit=wanted)
        if not page:
            return purged
        cursor = page[-1].dedup_key
        run_ids = [parse_entry(item.dedup_key or "").run_id for item in page]
        infos = await run_infos_async(aq, run_ids)
        due = [
            info
            for run_id in run_ids
            if (info := infos.get(run_id)) is not None
            and info.status == status
            and info.finished_at is not None
            and info.finished_at < before
            and (workflow is None or info.workflow == workflow)
        ]
        purged += await _purge_batch(aq, (await _unreferenced(aq, due))[: limit - purged])
    return purged


async def _purge_batch(aq: AsyncQueueClient, infos: list[RunInfo]) -> int:
    """Purge these runs; how many this call purged. A run whose items one scan
    reads is purged with the others such (:func:`_purge_together`), a larger
    one on its own (:func:`_purge_run`)."""
    small: list[tuple[RunInfo, list[StoredItem]]] = []
    purged = 0
    for info in infos:
        page = await aq.scan_keys(RESULTS_QUEUE, f"{info.run_id}/", limit=_PAGE)
        if not page:
            continue  # another purge took it
        if len(page) < _PAGE:
            small.append((info, page))
        elif await _purge_run(aq, info):
            purged += 1
    return purged + (await _purge_together(aq, small) if small else 0)


async def _purge_together(
    aq: AsyncQueueClient, runs: list[tuple[RunInfo, list[StoredItem]]]
) -> int:
    """Purge runs whose items were read (``runs``: each with all of its own), in
    a few transactions for them all: every run's history first, then each run's
    head, snapshots and index entries in one transaction (a run never split
    between two). When another purge took one of them meanwhile (a delete
    refused), they are purged one by one. Returns how many this call purged."""
    history: list[str] = []
    helds: list[list[StoredItem]] = []
    wanted: list[list[str]] = []
    for info, page in runs:
        held = _head_items(info, page)
        history += [item.id for item in page if item not in held]
        helds.append(held)
        wanted.append(_entry_keys(info, held))
    every = [key for keys in wanted for key in keys]
    found: dict[str, StoredItem] = {}
    for start in range(0, len(every), _PAGE):
        found |= await aq.lookup(RESULTS_QUEUE, every[start : start + _PAGE])
    lasts = [
        [item.id for item in held] + [found[k].id for k in keys if k in found]
        for held, keys in zip(helds, wanted, strict=True)
    ]
    try:
        for start in range(0, len(history), _PAGE):
            await aq.delete_items(RESULTS_QUEUE, history[start : start + _PAGE])
        chunk: list[str] = []
        for last in lasts:
            if chunk and len(chunk) + len(last) > _PAGE:
                await aq.delete_items(RESULTS_QUEUE, chunk)
                chunk = []
            if len(last) > _PAGE:  # many snapshots: as _purge_run deletes them
                for start in range(0, len(last), _PAGE):
                    await aq.delete_items(RESULTS_QUEUE, last[start : start + _PAGE])
            else:
                chunk += last
        if chunk:
            await aq.delete_items(RESULTS_QUEUE, chunk)
    except Conflict:  # another purge took some: the rest one by one
        return sum([await _purge_run(aq, info) for info, _ in runs])
    return len(runs)


async def _unreferenced(aq: AsyncQueueClient, infos: list[RunInfo]) -> list[RunInfo]:
    """These runs but the children whose parent has not ended (it waits on them)."""
    parents = {i.parent_run_id for i in infos if i.parent_run_id is not None}
    found = await run_infos_async(aq, list(parents)) if parents else {}
    return [
        i
        for i in infos
        if i.parent_run_id is None
        or (parent := found.get(i.parent_run_id)) is None
        or parent.status in FINISHED
    ]


async def _purge_run(aq: AsyncQueueClient, info: RunInfo) -> bool:
    """Delete one run's items: its history first, its head, attribute snapshots
    and index entries last, together. False when another purge took it first."""
    last: list[str] = []
    held: list[StoredItem] = []
    after: str | None = None
    try:
        while True:
            page = await aq.scan_keys(RESULTS_QUEUE, f"{info.run_id}/", after=after, limit=_PAGE)
            if not page:
                break
            after = page[-1].dedup_key
            kept = _head_items(info, page)
            held += kept
            body = [item.id for item in page if item not in kept]
            if body:
                await aq.delete_items(RESULTS_QUEUE, body)
        last += [item.id for item in held]
        keys = _entry_keys(info, held)
        for start in range(0, len(keys), 1000):
            entries = await aq.lookup(RESULTS_QUEUE, keys[start : start + 1000])
            last += [item.id for item in entries.values()]
        if not last:
            return False
        for start in range(0, len(last), 1000):  # one transaction unless it has many snapshots
            await aq.delete_items(RESULTS_QUEUE, last[start : start + 1000])
    except Conflict:  # another worker purges it at the same time
        return False
    return True


def _entry_keys(info: RunInfo, held: Sequence[StoredItem]) -> list[str]:
    """The keys of every index and attribute entry the run may have (``held``: its
    meta, result and snapshots)."""
    keys = [
        key
        for status in _INDEXED
        for key in entry_keys(
            info.run_id, info.workflow, info.started_at, status, new=status == "running"
        )
    ]
    return keys + _attribute_entries(info, held)


def _head_items(info: RunInfo, page: Sequence[StoredItem]) -> list[StoredItem]:
    """The items of ``page`` deleted last with the run's index entries: its meta,
    its result and its attribute snapshots."""
    head = {meta_key(info.run_id), result_key(info.run_id)}
    snapshots = attributes_prefix(info.run_id)
    return [i for i in page if i.dedup_key in head or (i.dedup_key or "").startswith(snapshots)]


def _attribute_entries(info: RunInfo, held: Sequence[StoredItem]) -> list[str]:
    """The keys of every attribute entry the run may have written: those of its
    start's values (its meta) and of each snapshot's values set by it."""
    snapshots: list[AttributesRecord] = []
    for item in held:
        if item.dedup_key == meta_key(info.run_id):
            meta = RunMeta.model_validate_json(item.payload)
            snapshots.append(AttributesRecord(gen=0, values=meta.attributes))
        elif item.dedup_key != result_key(info.run_id):
            snapshots.append(AttributesRecord.model_validate_json(item.payload))
    keys = {
        key
        for snapshot in snapshots
        for name, value in snapshot.values.items()
        if snapshot.since.get(name, 0) == snapshot.gen
        for key in attribute_entry_keys(
            info.run_id, info.workflow, info.started_at, name, value, snapshot.gen
        )
    }
    return sorted(keys)


class MessageSweep:
    """A worker's message sweeps: each reads the next :data:`MESSAGE_SWEEP_SCAN`
    mailbox marks past the last one it read (round again from the first once
    at the end), so every mark is reached however many runs still run."""

    def __init__(self, retention: float = MESSAGE_RETENTION) -> None:
        self.retention = retention
        """Seconds a run's messages are kept after its end."""
        self._cursor: str | None = None

    async def sweep(self, aq: AsyncQueueClient) -> int:
        """One sweep: prune the messages of runs ended more than
        :attr:`retention` ago among the next marks. Returns how many runs'
        messages it pruned."""
        before = aq.clock.now() - timedelta(seconds=self.retention)
        pruned, self._cursor = await _prune_mailboxes(
            aq, before, self._cursor, MESSAGE_SWEEP_SCAN, MESSAGE_SWEEP_ITEMS
        )
        return pruned


async def prune_messages_async(aq: AsyncQueueClient, *, before: datetime) -> int:
    """Delete the messages (read or not) of every run that ended before
    ``before`` (timezone-aware), and those left by purged runs; returns for how
    many runs. Running runs keep theirs. Reads every mailbox mark once."""
    if before.tzinfo is None or before.utcoffset() is None:
        raise InvalidArgument("before", "must be a timezone-aware datetime")
    pruned, cursor = 0, None
    while True:
        done, cursor = await _prune_mailboxes(aq, before, cursor, MESSAGE_SWEEP_SCAN, None)
        pruned += done
        if cursor is None:
            return pruned


async def _prune_mailboxes(
    aq: AsyncQueueClient, before: datetime, cursor: str | None, scan: int, items: int | None
) -> tuple[int, str | None]:
    """Prune the messages of the runs ended before ``before`` among up to
    ``scan`` mailbox marks past ``cursor``, stopping once ``items`` messages
    are deleted (None: no bound). Returns (runs pruned, the cursor to go on
    from: None once the marks are read to the end)."""
    pruned = deleted = read = 0
    while read < scan:
        want = min(_SCAN, scan - read)
        try:
            page = await aq.scan_keys(RESULTS_QUEUE, MAILBOXES_PREFIX, after=cursor, limit=want)
        except QueueNotFound:
            return pruned, None
        read += len(page)
        run_ids = [(item.dedup_key or "").removeprefix(MAILBOXES_PREFIX) for item in page]
        infos = await run_infos_async(aq, run_ids)
        for item, run_id in zip(page, run_ids, strict=True):
            cursor = item.dedup_key
            info = infos.get(run_id)
            if info is not None and (info.finished_at is None or info.finished_at >= before):
                continue  # running (or resumed), or ended too recently
            deleted += await _prune_mailbox(aq, run_id, item.id)
            pruned += 1
            if items is not None and deleted >= items:
                return pruned, cursor
        if len(page) < want:
            return pruned, None
    return pruned, cursor


async def _prune_mailbox(aq: AsyncQueueClient, run_id: str, mark_id: str) -> int:
    """Delete the messages of one run, then its mailbox mark; how many messages.
    A run without a meta (purged) may have some a send raced the purge with."""
    deleted = 0
    while True:
        page = await aq.scan_keys(RESULTS_QUEUE, mailbox_prefix(run_id), limit=_PAGE)
        if not page:
            break
        await delete_present_async(aq, [item.id for item in page])
        deleted += len(page)
    await delete_present_async(aq, [mark_id])
    return deleted


def prune_messages(q: QueueClient, *, before: datetime) -> int:
    """See :func:`prune_messages_async`."""
    return q.call(prune_messages_async, q.aio, before=before)


def purge_runs(
    q: QueueClient,
    *,
    before: datetime,
    status: RunStatus | Sequence[RunStatus] | None = None,
    workflow: str | None = None,
    limit: int = 1000,
) -> int:
    """See :func:`purge_runs_async`."""
    return q.call(
        purge_runs_async, q.aio, before=before, status=status, workflow=workflow, limit=limit
    )
