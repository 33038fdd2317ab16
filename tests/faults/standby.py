"""A streaming standby of a throwaway cluster, and its promotion.

``make_standby(primary)`` copies the primary with ``pg_basebackup -R`` (the
copy streams from the primary at once) and starts it on a free port.
``synchronous`` makes the primary's commits wait for it; ``detach`` stops it
receiving (the lag of an asynchronous standby, made certain); ``promote``
turns it into a primary on a new timeline.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import psycopg

from .cluster import ROLE, Cluster, ClusterError, _free_port


def make_standby(primary: Cluster) -> Cluster:
    """A hot standby streaming from ``primary`` (asynchronously), started."""
    root = Path(tempfile.mkdtemp(prefix="querator-standby-"))
    root.chmod(0o755)
    if primary.owner is not None:
        shutil.chown(root, user=primary.owner)
    standby = Cluster(root, primary.bindir, primary.owner, _free_port())
    standby.database = primary.database
    try:
        standby._pg(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", ROLE),
            *("-D", str(standby.data), "-R", "-X", "stream", "-c", "fast", "--no-sync"),
            what="pg_basebackup",
        )
        standby.start()
        wait_streaming(primary, 1)
    except BaseException:
        standby.destroy()
        raise
    return standby


def _replication(primary: Cluster) -> list[tuple[str, str]]:
    """``(state, sync_state)`` of each standby connected to ``primary``."""
    with psycopg.connect(primary.admin_dsn, connect_timeout=5, autocommit=True) as conn:
        rows = conn.execute("SELECT state, sync_state FROM pg_stat_replication").fetchall()
    return [(str(state), str(sync)) for state, sync in rows]


def wait_streaming(primary: Cluster, count: int, sync: bool = False, timeout: float = 30) -> None:
    """Until ``count`` standbys stream from ``primary`` (synchronously, if ``sync``)."""
    deadline = time.monotonic() + timeout
    while True:
        found = (
            [row for row in _replication(primary) if row[0] == "streaming" and (row[1] == "sync")]
            if sync
            else [row for row in _replication(primary) if row[0] == "streaming"]
        )
        if len(found) == count:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(f"standbys of {primary.port}: {_replication(primary)}")
        time.sleep(0.05)  # polling the server's view, with a deadline


def synchronous(primary: Cluster) -> None:
    """Make ``primary``'s commits wait for its standby (``synchronous_commit`` stays ``on``)."""
    primary.set_system("synchronous_standby_names", "*")
    wait_streaming(primary, 1, sync=True)


def detach(primary: Cluster, standby: Cluster) -> None:
    """Stop ``standby`` receiving from ``primary``: what it lags behind from now on is lost
    when it is promoted."""
    standby.set_system("primary_conninfo", "")
    deadline = time.monotonic() + 30
    while _replication(primary):
        if time.monotonic() >= deadline:
            raise ClusterError(f"the standby still streams: {_replication(primary)}")
        time.sleep(0.05)  # polling the server's view, with a deadline


def promote(standby: Cluster) -> None:
    """``pg_ctl promote``: the standby becomes a primary on a new timeline."""
    standby._pg("pg_ctl", "promote", "-D", str(standby.data), "-w", what="pg_ctl promote")
