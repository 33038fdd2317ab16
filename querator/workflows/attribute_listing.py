"""Listing runs by search attributes: one range scan of the attribute index.

``list_runs(attributes={...})`` scans the entries of its first attribute
(:func:`~querator.workflows.attributes.attribute_prefix`, of the workflow when
one is given) newest first, from the cursor of ``after``, down to ``since``;
the other attributes and the status are checked on the runs' records, read a
page at a time (:func:`~querator.workflows.inspection.run_heads_async`). An
entry of a value its run no longer holds (changed by ``set_attributes``), or
stamped by a starter that lost a race for an idempotency key, is skipped and
returned for deletion: once superseded, an entry never becomes current again
(a value set anew is a new entry, of a new generation).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from querator.errors import InvalidArgument
from querator.queue.service import AsyncQueueClient
from querator.workflows.attributes import (
    AttributesRecord,
    AttributeValue,
    attribute_prefix,
    parse_attribute_entry,
    run_position,
    same_value,
)
from querator.workflows.keys import RESULTS_QUEUE, meta_key
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


@dataclass(frozen=True)
class AttributeQuery:
    """What ``list_runs`` asked for, checked."""

    wanted: Mapping[str, AttributeValue]
    """At least one attribute: the first is scanned, the others checked."""
    workflow: str | None
    status: RunStatus | None
    since: datetime | None
    after: str | None
    limit: int
    until: datetime | None = None
    """Only runs started before this instant (the dashboard's filter)."""

    def holds(self, info: RunInfo) -> bool:
        """Whether a run whose entry of the first attribute is current matches the rest."""
        return (
            (self.workflow is None or info.workflow == self.workflow)
            and (self.status is None or info.status == self.status)
            and all(same_value(info.attributes.get(k), v) for k, v in self.wanted.items())
        )


async def _cursor(
    aq: AsyncQueueClient, prefix: str, after: str | None, until: datetime | None
) -> str | None:
    if after is None:
        return since_bound(prefix, until) if until is not None else None
    found = await aq.lookup(RESULTS_QUEUE, [meta_key(after)])
    if meta_key(after) not in found:
        raise InvalidArgument("after", f"no run {after!r} is stored")
    meta = RunMeta.model_validate_json(found[meta_key(after)].payload)
    return run_position(prefix, after, meta.started_at)


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
    key, value = next(iter(query.wanted.items()))
    prefix = attribute_prefix(query.workflow, key, value)
    cursor = await _cursor(aq, prefix, query.after, query.until)
    stop = since_bound(prefix, query.since) if query.since is not None else None
    runs: list[RunInfo] = []
    stale: list[str] = []
    read = 0
    while len(runs) < query.limit:
        want = _scan_size(query.limit - len(runs), read, len(runs))
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=cursor, limit=want)
        read += len(page)
        entries = [
            (item.id, item.dedup_key or "", parsed)
            for item in page
            if (stop is None or (item.dedup_key or "") < stop)
            and (parsed := parse_attribute_entry(item.dedup_key or "")) is not None
        ]
        found = await heads(aq, [parsed[0] for _, _, parsed in entries])
        for item_id, entry, (run_id, gen) in entries:
            if run_id not in found:
                continue  # no meta: a run being purged
            info, current = found[run_id]
            own = entry.startswith(f"{prefix}{stamp(info.started_at)}/{run_id}/")
            held = current.since.get(key, 0) == gen and same_value(current.values.get(key), value)
            if not own or not held:  # a racing starter's, or a value changed since
                stale.append(item_id)
            elif query.holds(info):
                runs.append(info)
                if len(runs) == query.limit:
                    break
        if len(page) < want or len(entries) < len(page):
            break
        cursor = page[-1].dedup_key
    return runs, stale
