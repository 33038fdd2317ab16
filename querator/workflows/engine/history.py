"""What is stored about a run, and loading it in one query (a replay's input)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import (
    RESULTS_QUEUE,
    cancel_key,
    compensating_key,
    meta_key,
    result_key,
    step_key,
)
from querator.workflows.stored import CancelRecord, RunMeta, RunRecord, StepRecord

__all__ = ["WINDOW", "History", "load_history", "load_records", "started"]

WINDOW = 32
"""Positions looked up past the last one known to exist; the window doubles
while the history goes on past it."""

EVERYTHING = 1 << 62
"""``History.known`` of a history holding every record there is."""


@dataclass(frozen=True)
class History:
    """What is stored about a run."""

    meta: RunMeta | None
    records: dict[int, StepRecord]
    finished: RunRecord | None
    cancel: CancelRecord | None = None
    known: int = 0
    """Positions below this were looked up (records beyond it are not loaded)."""
    created: dict[int, datetime] = field(default_factory=dict)
    """When each step record was stored (sagas compensate in reverse of this)."""
    compensating: bool = False
    """A saga's ``{run}/compensating`` record exists."""


def _heads(run_id: str) -> list[str]:
    return [meta_key(run_id), result_key(run_id), cancel_key(run_id), compensating_key(run_id)]


async def load_records(
    aq: AsyncQueueClient,
    run_id: str,
    records: dict[int, StepRecord],
    created: dict[int, datetime],
    start: int,
    upto: int,
    heads: list[str] | None = None,
) -> tuple[int, dict[str, bytes]]:
    """Look up positions ``start .. upto + WINDOW`` (and ``heads``) in one lookup,
    then, while the last window held a record, the next one, twice as wide.

    Fills ``records`` and ``created``; returns the first position not looked up
    and the payloads of the ``heads`` found. Gathered steps finish out of
    order, so a window with gaps may be followed by records: only an empty
    window past ``upto`` ends the history.
    """
    wanted = list(heads or [])
    found_heads: dict[str, bytes] = {}
    end = max(start, upto) + WINDOW
    while True:
        keys = [step_key(run_id, i) for i in range(start, end)]
        found = await aq.lookup(RESULTS_QUEUE, wanted + keys)
        found_heads.update({k: found[k].payload for k in wanted if k in found})
        wanted = []
        hit = False
        for offset, key in enumerate(keys):
            item = found.get(key)
            if item is not None:
                hit = True
                records[start + offset] = StepRecord.model_validate_json(item.payload)
                created[start + offset] = item.created_at
        if not hit and start > upto:
            return end, found_heads
        start, end = end, end + 2 * (end - start)


async def load_history(aq: AsyncQueueClient, run_id: str, upto: int = 0) -> History:
    """The run's meta, result, cancel request and step records.

    ``upto``: a position known to be reached (the item that asks), so the
    whole history usually comes back in one lookup.
    """
    records: dict[int, StepRecord] = {}
    created: dict[int, datetime] = {}
    heads = _heads(run_id)
    known, found = await load_records(aq, run_id, records, created, 0, upto, heads)
    meta, finished, cancel, compensating = (found.get(key) for key in heads)
    return History(
        RunMeta.model_validate_json(meta) if meta else None,
        records,
        RunRecord.model_validate_json(finished) if finished else None,
        CancelRecord.model_validate_json(cancel) if cancel else None,
        known,
        created,
        compensating is not None,
    )


def started(meta: RunMeta) -> History:
    """The history a run's start wake knows of: its meta and nothing else.

    True while the start wake is leasable, as far as steps go: only its
    handling dispatches a run's first step, and the commit doing so completes
    it. What may exist anyway changes no step's outcome: a cancel request,
    which every step item looks up before it runs, or the records of a run
    started again with the same idempotency key after its start wake was
    consumed, which each step item finds as its own record. A body that would
    do anything but dispatch steps first (end the run, sleep, start a child)
    is replayed from what is stored instead, so a cancel request stored
    meanwhile stops it. A deadline could end a run before its start wake
    runs: a run with one gets no meta in its start wake and is looked up.
    """
    return History(meta, {}, None, None, known=EVERYTHING)
