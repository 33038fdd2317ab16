"""The run index: keyed entries that list runs newest first, by workflow and status.

Every run has entries in the results queue whose dedup keys sort newest first
(``t`` is the run's start time in microseconds, inverted and zero-padded):

- ``index/all/{t}/{run}`` and ``index/wf/{workflow}/{t}/{run}``, written with the
  run's meta when it starts;
- ``index/st/{status}/{t}/{run}`` and ``index/ws/{workflow}/{status}/{t}/{run}``,
  written for ``running`` when it starts (and when it is resumed) and for its
  final status in the transaction that stores its result.

A page of runs is one range scan of the dedup-key index
(:meth:`~querator.queue.service.AsyncQueueClient.scan_keys`) plus one lookup of the
runs' records, whatever the number of runs stored. An entry of a status the run
has left (``running`` once it ended, ``failed`` once it was resumed) is skipped
by the lister, which reads every listed run's current status anyway, and
deleted by it (by the item id it read), so such entries are walked over at most
once; a resume replaces its run's stale ``running`` entries with new items, and
the lister then writes the entries of the runs' current status again, so a run
that came back to the entry's status meanwhile is not dropped from its list
(:func:`~querator.workflows.inspection.prune_entries_async`). An entry whose
stamp is not its run's start time (starters that raced with one idempotency
key, each with its own clock) is skipped and deleted likewise: a run is listed
once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "IndexEntry",
    "entry_key",
    "entry_keys",
    "entry_started_at",
    "facet_prefix",
    "facet_segment",
    "parse_entry",
    "since_bound",
    "stamp",
]

PREFIX = "index/"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TOP = 10**16 - 1
"""Inverted start times are ``_TOP - microseconds since 1970`` (16 digits until 2286)."""
_LONG_NAME = 400
"""Workflow names longer than this are indexed by a digest (keys hold 512 characters)."""


def _micros(at: datetime) -> int:
    delta = at.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def stamp(at: datetime) -> str:
    """A start time as a key segment: inverted, so that newer runs sort first."""
    return f"{_TOP - _micros(at):016d}"


_PLAIN = re.compile(rf"[A-Za-z0-9._-]{{1,{_LONG_NAME}}}")


def facet_segment(workflow: str) -> str:
    """The name as a key segment: itself when plain, else ``#`` and a digest (names
    may hold ``/`` or ``<locals>``; ``#`` never starts a plain one)."""
    if _PLAIN.fullmatch(workflow):
        return workflow
    return "#" + hashlib.sha256(workflow.encode()).hexdigest()[:40]


def facet_prefix(workflow: str | None, status: str | None) -> str:
    """The key prefix of the entries of runs of ``workflow`` with ``status`` (None: any)."""
    if workflow is None:
        return f"{PREFIX}all/" if status is None else f"{PREFIX}st/{status}/"
    name = facet_segment(workflow)
    return f"{PREFIX}wf/{name}/" if status is None else f"{PREFIX}ws/{name}/{status}/"


def entry_keys(
    run_id: str, workflow: str, started_at: datetime, status: str, *, new: bool
) -> list[str]:
    """The keys of a run's entries for ``status``, and the status-free ones when ``new``."""
    tail = f"{stamp(started_at)}/{run_id}"
    facets: list[tuple[str | None, str | None]] = [(workflow, status), (None, status)]
    if new:
        facets += [(workflow, None), (None, None)]
    return [facet_prefix(w, s) + tail for w, s in facets]


def entry_key(prefix: str, run_id: str, started_at: datetime) -> str:
    """The key of a run's entry under ``prefix`` (a page cursor)."""
    return f"{prefix}{stamp(started_at)}/{run_id}"


def since_bound(prefix: str, since: datetime) -> str:
    """Keys under ``prefix`` greater than this are runs started before ``since``."""
    return f"{prefix}{stamp(since)}/~"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One entry read back: its key and the run it names."""

    key: str
    run_id: str


def parse_entry(key: str) -> IndexEntry:
    """The run an entry's key names (its last segment)."""
    return IndexEntry(key=key, run_id=key.rsplit("/", 1)[-1])


def entry_started_at(key: str) -> datetime | None:
    """The start time an entry's key holds (None when the key is not an entry's)."""
    parts = key.rsplit("/", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return _EPOCH + timedelta(microseconds=_TOP - int(parts[1]))
