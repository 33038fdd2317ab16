"""Listing runs by search attributes: range scans of the attribute index.

``list_runs(attributes={...})`` walks the entries of one attribute
(:func:`~querator.workflows.attributes.attribute_prefix`, of the workflow when
one is given) newest first, from the cursor of ``after``, down to ``since``,
and reads the records of the runs they name a page at a time
(:func:`~querator.workflows.inspection.run_heads_async`), which decide: the
status and every attribute are checked on them.

With several attributes (an AND), the first page of every one's entries is
read at once and the rarest near the cursor is walked: the one whose page
reached furthest back. Before any run's records are read, its entries are
narrowed by one lookup of index keys: a run that never changed its attributes
holds the others' values only if their start entries exist under its
position. So an AND page reads about as many records as the rarest
attribute's page would, whatever order the attributes were given in.

An entry of a value its run no longer holds (changed by ``set_attributes``), or
stamped by a starter that lost a race for an idempotency key, is skipped and
returned for deletion: once superseded, an entry never becomes current again
(a value set anew is a new entry, of a new generation).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import anyio

from querator.errors import InvalidArgument
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.attributes import (
    AttributesRecord,
    AttributeValue,
    attribute_prefix,
    parse_attribute_entry,
    run_position,
    same_value,
    start_entry_key,
)
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.run_attributes import first_snapshot_key
from querator.workflows.run_index import since_bound, stamp
from querator.workflows.run_models import RunInfo
from querator.workflows.runs import RunStatus
from querator.workflows.stored import RunMeta

__all__ = ["AttributeQuery", "scan_by_attributes_async"]

Heads = Callable[
    [AsyncQueueClient, list[str]], Awaitable[dict[str, tuple[RunInfo, AttributesRecord]]]
]
"""Reads runs' infos and current attributes by id (``run_heads_async``)."""
INDEX_PAGE = 200
"""Index entries read per ``scan_keys`` call at most."""
MIN_SCAN = 10
"""Index entries read per call at least: a scan reads as many entries as the
page still needs at the rate they were listed so far (every one it reads costs
a lookup of its run), no fewer."""
AND_RATE = 2
"""An AND's first pages read this many entries of each attribute per run the
page wants (at most :data:`INDEX_PAGE`): its runs pass the others' check at a
rate not yet known, and an entry read costs a key lookup, not a run's records;
4 cost more than a second page where half pass (``docs/benchmarks.md``)."""
LOOKUP_KEYS = 1000
"""Keys a ``lookup`` call takes at most."""


@dataclass(frozen=True)
class AttributeQuery:
    """What ``list_runs`` asked for, checked."""

    wanted: Mapping[str, AttributeValue]
    """At least one attribute (the rarest is walked, the others checked)."""
    workflow: str | None
    status: RunStatus | None
    since: datetime | None
    after: str | None
    limit: int
    until: datetime | None = None
    """Only runs started before this instant (the dashboard's filter)."""

    def holds(self, info: RunInfo) -> bool:
        """Whether a run whose entry of the walked attribute is current matches the rest."""
        return (
            (self.workflow is None or info.workflow == self.workflow)
            and (self.status is None or info.status == self.status)
            and all(same_value(info.attributes.get(k), v) for k, v in self.wanted.items())
        )


async def _after_position(aq: AsyncQueueClient, after: str | None) -> str | None:
    """Where the run ``after`` sorts under any attribute's prefix (None: no ``after``)."""
    if after is None:
        return None
    found = await aq.lookup(RESULTS_QUEUE, [meta_key(after)])
    if meta_key(after) not in found:
        raise InvalidArgument("after", f"no run {after!r} is stored")
    meta = RunMeta.model_validate_json(found[meta_key(after)].payload)
    return run_position("", after, meta.started_at)


@dataclass
class _Scan:
    """One attribute's entries, walked in key order (newest run first)."""

    key: str
    value: AttributeValue
    prefix: str
    cursor: str | None
    stop: str | None

    @classmethod
    def of(cls, query: AttributeQuery, key: str, position: str | None) -> _Scan:
        value = query.wanted[key]
        prefix = attribute_prefix(query.workflow, key, value)
        if position is not None:
            cursor: str | None = prefix + position
        else:
            cursor = since_bound(prefix, query.until) if query.until is not None else None
        stop = since_bound(prefix, query.since) if query.since is not None else None
        return cls(key, value, prefix, cursor, stop)

    async def read(self, aq: AsyncQueueClient, limit: int) -> list[StoredItem]:
        return await aq.scan_keys(RESULTS_QUEUE, self.prefix, after=self.cursor, limit=limit)

    def entries(self, page: list[StoredItem]) -> list[_Entry]:
        """The entries of ``page`` before ``stop`` (in key order)."""
        found = []
        for item in page:
            entry = item.dedup_key or ""
            if self.stop is not None and entry >= self.stop:
                break
            parsed = parse_attribute_entry(entry)
            if parsed is not None:
                found.append(_Entry(item.id, entry, parsed[0], parsed[1]))
        return found


@dataclass(frozen=True)
class _Entry:
    item_id: str
    key: str
    run_id: str
    gen: int


async def _first_pages(
    aq: AsyncQueueClient, scans: list[_Scan], limit: int
) -> list[list[StoredItem]]:
    """The first page of every scan, read at once (one round trip's wait)."""
    if len(scans) == 1:
        return [await scans[0].read(aq, limit)]
    pages: list[list[StoredItem]] = [[] for _ in scans]

    async def read(index: int) -> None:
        pages[index] = await scans[index].read(aq, limit)

    try:
        async with anyio.create_task_group() as group:
            for index in range(len(scans)):
                group.start_soon(read, index)
    except BaseExceptionGroup as failed:  # the first error as itself (QueueNotFound)
        raise failed.exceptions[0] from None
    return pages


def _rarest(scans: list[_Scan], pages: list[list[StoredItem]], limit: int) -> int:
    """The scan whose first page reached furthest back: a scan that ran out (the
    fewest entries first), else the one whose last entry is the oldest. Its
    attribute is the rarest near the cursor: the one to walk."""

    def reach(index: int) -> tuple[bool, int, str]:
        scan, page = scans[index], pages[index]
        entries = scan.entries(page)
        if len(page) < limit or len(entries) < len(page):
            return (True, -len(entries), "")
        return (False, 0, entries[-1].key[len(scan.prefix) :] if entries else "")

    return max(range(len(scans)), key=reach)


async def _holding_others(
    aq: AsyncQueueClient, walked: _Scan, others: list[_Scan], entries: list[_Entry]
) -> list[_Entry]:
    """The ``entries`` (of ``walked``) whose runs may hold the ``others`` too: their
    start entries of the others' values exist, or they changed their attributes
    since the start (a first snapshot exists: the run's records will tell). A run
    that never changed them holds its start's values, each with its entry of
    generation 0; the lookup reads index keys only, no run's records."""
    per_entry = len(others) + 1
    chunk = LOOKUP_KEYS // per_entry
    kept: list[_Entry] = []
    for first in range(0, len(entries), chunk):
        part = entries[first : first + chunk]
        wanted = [
            [start_entry_key(o.prefix, e.key[len(walked.prefix) :]) for o in others]
            + [first_snapshot_key(e.run_id)]
            for e in part
        ]
        found = await aq.lookup(RESULTS_QUEUE, [k for keys in wanted for k in keys])
        kept += [
            e
            for e, keys in zip(part, wanted, strict=True)
            if keys[-1] in found or all(k in found for k in keys[:-1])
        ]
    return kept


def _scan_size(needed: int, read: int, listed: int) -> int:
    """Entries to read next for ``needed`` more runs, at the rate the entries read
    so far were listed (every entry read costs a lookup of its run)."""
    rate = read / listed if listed else (2.0 if read else 1.0)
    return min(INDEX_PAGE, max(MIN_SCAN, math.ceil(needed * rate)))


async def scan_by_attributes_async(
    aq: AsyncQueueClient, heads: Heads, query: AttributeQuery
) -> tuple[list[RunInfo], list[str]]:
    """The runs ``query`` lists, newest first, and the item ids of the stale
    entries met (for the caller to delete)."""
    position = await _after_position(aq, query.after)
    scans = [_Scan.of(query, key, position) for key in query.wanted]
    want = _scan_size(query.limit, 0, 0)
    if len(scans) > 1:
        want = min(INDEX_PAGE, max(MIN_SCAN, AND_RATE * query.limit))
    pages = await _first_pages(aq, scans, want)
    walked_at = _rarest(scans, pages, want)
    walked, page = scans[walked_at], pages[walked_at]
    others = scans[:walked_at] + scans[walked_at + 1 :]
    runs: list[RunInfo] = []
    stale: list[str] = []
    read = 0
    while True:
        entries = walked.entries(page)
        read += len(entries)
        candidates = await _holding_others(aq, walked, others, entries) if others else entries
        while candidates and len(runs) < query.limit:
            # every one of a single attribute's entries (sized to the page); of an
            # AND's filtered candidates, as many as the page still needs
            take = len(candidates) if not others else query.limit - len(runs)
            batch, candidates = candidates[:take], candidates[take:]
            found = await heads(aq, [e.run_id for e in batch])
            runs += _listed(query, walked, batch, found, stale, query.limit - len(runs))
        if len(runs) == query.limit or len(page) < want or len(entries) < len(page):
            return runs, stale
        walked.cursor = page[-1].dedup_key
        want = _scan_size(query.limit - len(runs), read, len(runs))
        page = await walked.read(aq, want)


def _listed(
    query: AttributeQuery,
    walked: _Scan,
    batch: list[_Entry],
    found: dict[str, tuple[RunInfo, AttributesRecord]],
    stale: list[str],
    room: int,
) -> list[RunInfo]:
    """The runs of ``batch`` that ``query`` lists (at most ``room``); the ids of
    stale entries met are added to ``stale``."""
    runs: list[RunInfo] = []
    for e in batch:
        if e.run_id not in found:
            continue  # no meta: a run being purged
        info, current = found[e.run_id]
        own = e.key.startswith(f"{walked.prefix}{stamp(info.started_at)}/{e.run_id}/")
        held = current.since.get(walked.key, 0) == e.gen and same_value(
            current.values.get(walked.key), walked.value
        )
        if not own or not held:  # a racing starter's, or a value changed since
            stale.append(e.item_id)
        elif query.holds(info):
            runs.append(info)
            if len(runs) == room:
                break
    return runs
