"""Failover to a standby: noticed when reconnecting, and what replication guarantees.

Every pooled session reads, when it opens, the cluster's system identifier and
the timeline the server writes on (:data:`WHERE_AM_I`). A standby promoted to
primary has the same system identifier and a higher timeline. When a session
opens on another timeline than the previous ones did, :class:`Timeline` logs
one ERROR saying what may have been lost: with asynchronous replication, the
commits the old primary acknowledged last (before its standby received them)
are gone from the new primary. With synchronous replication
(``synchronous_commit`` ``on`` or ``remote_apply`` and a synchronous standby)
an acknowledged commit is on the standby too, and nothing is lost.

:func:`replication_report` says which of the two a store has, for
``querator health --require-sync-replication``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger("querator.postgres")

WHERE_AM_I = sql.SQL(
    "SELECT (SELECT system_identifier FROM pg_control_system()),"
    " CASE WHEN pg_is_in_recovery() THEN NULL"
    " ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END"
)
"""The cluster's system identifier and the timeline written on (hex; NULL on a standby)."""

REPLICATION = sql.SQL(
    "SELECT current_setting('synchronous_commit'),"
    " current_setting('synchronous_standby_names'),"
    " (SELECT count(*) FROM pg_stat_replication"
    "   WHERE sync_state IN ('sync', 'quorum') AND state = 'streaming'),"
    " (SELECT count(*) FROM pg_stat_replication),"
    " pg_is_in_recovery()"
)
"""What this session's commits wait for, and the standbys streaming from the server."""

SYNCHRONOUS_COMMITS = ("on", "remote_apply")
"""``synchronous_commit`` values under which an acknowledged commit is on a synchronous
standby's disk (``remote_write``: only in its memory; ``local``/``off``: not at all)."""


class Timeline:
    """The cluster and timeline the pool's sessions write on; one ERROR per change."""

    __slots__ = ("_last_answer", "_seen", "store")

    def __init__(self, store: str) -> None:
        self.store = store
        self._seen: tuple[int, int] | None = None
        self._last_answer: float | None = None

    def answered(self) -> None:
        """A call was answered (the time goes in the failover's message)."""
        self._last_answer = time.time()

    def opened_on(self, system: int, timeline_hex: str | None) -> None:
        """A session opened on ``system`` and timeline ``timeline_hex`` (None: a standby)."""
        if timeline_hex is None:
            return
        now = (system, int(timeline_hex, 16))
        before, self._seen = self._seen, now
        if before is None or before == now:
            return
        log.error("%s", self._message(before, now))

    def _message(self, before: tuple[int, int], now: tuple[int, int]) -> str:
        last = "never"
        if self._last_answer is not None:
            last = datetime.fromtimestamp(self._last_answer, UTC).strftime("%H:%M:%S.%f")[:-3]
        if before[0] != now[0]:
            return (
                f"{self.store}: now served by another cluster (system identifier {now[0]},"
                f" was {before[0]}): whatever the old one stored may be missing"
            )
        return (
            f"{self.store}: FAILOVER: the primary is now on timeline {now[1]} (was"
            f" {before[1]}): a standby was promoted. Unless replication was synchronous"
            " (synchronous_commit on or remote_apply, with a synchronous standby), the"
            " commits the old primary acknowledged last may be lost: the old primary last"
            f" answered this client at {last} UTC; runs started, steps completed and items"
            " produced shortly before may be missing or run again"
        )


def replication_report(conninfo: str, timeout: float = 10.0) -> dict[str, Any]:
    """What the server at ``conninfo`` guarantees of an acknowledged commit.

    ``synchronous`` is True when this session's commits wait for a synchronous
    standby to flush them (``synchronous_commit`` in :data:`SYNCHRONOUS_COMMITS`,
    ``synchronous_standby_names`` set, and such a standby streaming now).
    """
    with psycopg.connect(conninfo, connect_timeout=max(1, int(timeout)), autocommit=True) as conn:
        row = conn.execute(REPLICATION).fetchone()
        system, timeline = conn.execute(WHERE_AM_I).fetchone() or (None, None)
    assert row is not None
    commit, names, sync_standbys, standbys, in_recovery = row
    return {
        "synchronous_commit": commit,
        "synchronous_standby_names": names,
        "sync_standbys": int(sync_standbys),
        "standbys": int(standbys),
        "in_recovery": bool(in_recovery),
        "timeline": None if timeline is None else int(timeline, 16),
        "system_identifier": None if system is None else str(system),
        "synchronous": bool(
            commit in SYNCHRONOUS_COMMITS and names and sync_standbys and not in_recovery
        ),
    }
