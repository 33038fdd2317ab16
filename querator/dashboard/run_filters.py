"""The runs list's filters (status, workflow, start time, id, search attributes:
``where=name=value``, repeatable) read from the URL,
the page of runs they select, and the counts by status.

A page walks the run index (:mod:`querator.workflows.run_index`) as
:func:`~querator.workflows.inspection.list_runs_async` does, between two start
times: ``since`` stops the walk, ``until`` (or ``after``, the last run of the
previous page) starts it. An ``id`` is a run id or its beginning: a range scan
of the records' keys, by id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast, get_args
from urllib.parse import urlencode

import anyio
from starlette.datastructures import QueryParams

from querator.errors import InvalidArgument, QueueNotFound
from querator.workflows.attribute_listing import AttributeQuery, scan_by_attributes_async
from querator.workflows.attributes import (
    MAX_ATTRIBUTES,
    AttributeValue,
    parse_condition,
    same_value,
)
from querator.workflows.inspection import (
    RunInfo,
    delete_present_async,
    prune_entries_async,
    run_heads_async,
    run_infos_async,
    scan_runs_async,
)
from querator.workflows.keys import RESULTS_QUEUE
from querator.workflows.run_index import entry_key, facet_prefix, parse_entry, since_bound
from querator.workflows.runs import RunStatus

if TYPE_CHECKING:
    from querator.queue.service import AsyncQueueClient

PENDING = ("running", "compensating", "compensation_failed")
"""Statuses the run index keeps under ``running``."""
INDEXED = ("running", "completed", "failed", "cancelled", "compensated")
"""The statuses the run index keeps entries for."""
FINAL = frozenset({"completed", "compensated"})
"""Statuses a run never leaves: their entries are never stale."""
COUNT_CAP = 200
"""Index entries read per status for the counts (one index page)."""
ID_KEYS = 1000
"""Record keys an id search reads at most."""
KEYS = ("status", "workflow", "since", "until", "id")
WHERE = "where"
"""The search-attribute filter (``name=value``; repeated: all of them)."""


def _instant(field: str, text: str | None) -> datetime | None:
    """``2026-11-25T17:03`` (a ``datetime-local`` field, UTC) or an ISO instant."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(field, f"must be a date and time (UTC), got {text!r}") from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


@dataclass(frozen=True)
class Filters:
    """What the runs list shows, from its URL."""

    status: RunStatus | None = None
    workflow: str | None = None
    since: datetime | None = None
    """Runs started at or after this instant."""
    until: datetime | None = None
    """Runs started before this instant."""
    run_id: str | None = None
    """A run id or its beginning."""
    where: tuple[tuple[str, AttributeValue], ...] = ()
    """Search attributes the runs hold (``list_runs(attributes=...)``)."""
    text: tuple[tuple[str, str], ...] = ()
    """The filters as given (for links and the form)."""

    @classmethod
    def of(cls, params: QueryParams) -> Filters:
        """The filters of a query string (empty values: no filter)."""
        status = params.get("status") or None
        if status is not None and status not in get_args(RunStatus):
            raise InvalidArgument("status", f"must be one of {get_args(RunStatus)}, got {status!r}")
        workflow = params.get("workflow") or None
        if workflow is not None and len(workflow) > 512:
            raise InvalidArgument("workflow", "must be at most 512 characters")
        run_id = (params.get("id") or "").strip() or None
        if run_id is not None and (len(run_id) > 200 or "/" in run_id):
            raise InvalidArgument("id", "must be a run id or its beginning (no '/')")
        conditions = [w for w in params.getlist(WHERE) if w.strip()]
        where = tuple(parse_condition(w.strip(), WHERE) for w in conditions)
        if len(dict(where)) > MAX_ATTRIBUTES:
            raise InvalidArgument(WHERE, f"names at most {MAX_ATTRIBUTES} attributes")
        return cls(
            status=cast("RunStatus | None", status),
            where=where,
            workflow=workflow,
            since=_instant("since", params.get("since")),
            until=_instant("until", params.get("until")),
            run_id=run_id,
            text=(
                *((k, params[k]) for k in KEYS if params.get(k)),
                *((WHERE, w) for w in conditions),
            ),
        )

    def value(self, key: str) -> str:
        """The filter ``key`` as given (empty when not)."""
        return dict(self.text).get(key, "")

    def query(self, **more: str) -> str:
        """The query string of these filters and ``more``."""
        return urlencode([*self.text, *((k, v) for k, v in more.items() if v)])

    def by_status(self, status: str) -> str:
        """The query string of the runs of ``status`` under these filters' workflow
        and search attributes (what the counts count)."""
        kept = [(k, v) for k, v in self.text if k in ("workflow", WHERE)]
        return urlencode([("status", status), *kept])

    def matches(self, info: RunInfo) -> bool:
        """Whether ``info`` passes every filter (for runs found by id)."""
        return (
            (self.status is None or info.status == self.status)
            and (self.workflow is None or info.workflow == self.workflow)
            and (self.since is None or info.started_at >= self.since)
            and (self.until is None or info.started_at < self.until)
            and all(same_value(info.attributes.get(k), v) for k, v in self.where)
        )


async def page_of_runs(
    aq: AsyncQueueClient, filters: Filters, after: str | None, limit: int
) -> list[RunInfo]:
    """Up to ``limit`` runs the filters select, newest first, past run ``after``."""
    if filters.run_id is not None:
        return [info for info in await runs_by_id(aq, filters.run_id) if filters.matches(info)][
            :limit
        ]
    if filters.where:
        return await _page_by_attributes(aq, filters, after, limit)
    facet: RunStatus | None = "running" if filters.status in PENDING else filters.status
    prefix = facet_prefix(filters.workflow, facet)
    try:
        cursor = await _cursor(aq, prefix, filters, after)
    except QueueNotFound:
        return []
    stop = since_bound(prefix, filters.since) if filters.since is not None else None
    runs, stale = await scan_runs_async(
        aq, prefix, facet, cursor, stop, filters.status, filters.workflow, limit
    )
    await prune_entries_async(aq, stale)
    return runs


async def _page_by_attributes(
    aq: AsyncQueueClient, filters: Filters, after: str | None, limit: int
) -> list[RunInfo]:
    """:func:`page_of_runs` through the index of the rarest attribute filtered on."""
    query = AttributeQuery(
        dict(filters.where),
        filters.workflow,
        filters.status,
        filters.since,
        after,
        limit,
        until=filters.until,
    )
    try:
        runs, stale = await scan_by_attributes_async(aq, run_heads_async, query)
    except QueueNotFound:
        return []
    await delete_present_async(aq, stale)
    return runs


async def _cursor(
    aq: AsyncQueueClient, prefix: str, filters: Filters, after: str | None
) -> str | None:
    if after is not None:
        found = await run_infos_async(aq, [after])
        if after not in found:
            raise InvalidArgument("after", f"no run {after!r} is stored")
        return entry_key(prefix, after, found[after].started_at)
    await aq.get_queue(RESULTS_QUEUE)  # QueueNotFound: nothing was ever started
    if filters.until is not None:
        return since_bound(prefix, filters.until)  # past every run started at or after it
    return None


async def runs_by_id(aq: AsyncQueueClient, beginning: str) -> list[RunInfo]:
    """The runs whose id starts with ``beginning``, by id (from the first
    :data:`ID_KEYS` record keys under it)."""
    try:
        page = await aq.scan_keys(RESULTS_QUEUE, beginning, limit=ID_KEYS)
    except QueueNotFound:
        return []
    ids = list(dict.fromkeys((item.dedup_key or "").split("/", 1)[0] for item in page))
    found = await run_infos_async(aq, [i for i in ids if i.startswith(beginning)])
    return [found[i] for i in ids if i in found]


def _indexed_as(info: RunInfo) -> str:
    return "running" if info.status in PENDING else info.status


async def counts(
    aq: AsyncQueueClient,
    workflow: str | None,
    where: tuple[tuple[str, AttributeValue], ...] = (),
) -> dict[str, str]:
    """Runs by status, from the index: at most :data:`COUNT_CAP` entries each
    (``N+`` when there are more), the statuses read at once. Entries of a
    status a run may leave (``running``, ``failed``, ``cancelled``) are checked
    against the runs' records, so a run is counted under its current status
    only. With search attributes (``where``), the newest :data:`COUNT_CAP`
    runs that hold them are counted instead (:func:`_counts_by_attributes`).
    Nothing is written (a listing prunes the stale entries)."""
    shown: dict[str, str] = {}
    try:
        await aq.get_queue(RESULTS_QUEUE)
    except QueueNotFound:
        return {}
    if where:
        return await _counts_by_attributes(aq, workflow, where)
    async with anyio.create_task_group() as group:
        for status in INDEXED:
            group.start_soon(_count, aq, workflow, status, shown)
    return {status: shown[status] for status in INDEXED if status in shown}


async def _counts_by_attributes(
    aq: AsyncQueueClient, workflow: str | None, where: tuple[tuple[str, AttributeValue], ...]
) -> dict[str, str]:
    """Runs by status among the newest :data:`COUNT_CAP` runs (of ``workflow``)
    that hold the attributes ``where``: the scan of the attribute index a
    listing makes, each run under its current status (``N+`` for every status
    when that many were found: older runs are not counted)."""
    query = AttributeQuery(dict(where), workflow, None, None, None, COUNT_CAP)
    runs, _stale = await scan_by_attributes_async(aq, run_heads_async, query)
    tally = Counter(_indexed_as(info) for info in runs)
    more = "+" if len(runs) >= COUNT_CAP else ""
    return {status: f"{tally[status]}{more}" for status in INDEXED}


async def _count(
    aq: AsyncQueueClient, workflow: str | None, status: str, shown: dict[str, str]
) -> None:
    prefix = facet_prefix(workflow, status)
    try:
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, limit=COUNT_CAP)
    except QueueNotFound:
        return
    full, count = len(page) == COUNT_CAP, len(page)
    if status not in FINAL and page:
        entries = [parse_entry(item.dedup_key or "") for item in page]
        infos = await run_infos_async(aq, [entry.run_id for entry in entries])
        count = sum(
            1
            for entry in entries
            if (info := infos.get(entry.run_id)) is not None
            and _indexed_as(info) == status
            and entry.key == entry_key(prefix, info.run_id, info.started_at)
        )
    shown[status] = f"{count}+" if full else str(count)
