"""A throwaway Citus cluster: a coordinator and two workers on 127.0.0.1.

Each node is a :class:`faults.cluster.Cluster` (initdb on a free port, as a
non-root owner when we are root) started with Citus preloaded, schema-based
sharding on and prepared transactions allowed (Citus commits a transaction
over two nodes with two-phase commit). The tests' database is created and
``CREATE EXTENSION citus`` run on every node (Citus does not propagate
``CREATE DATABASE``); then the coordinator learns its own address and adds
the workers. :func:`citus_installed` says whether the extension is built
into the local PostgreSQL (``bash ../shared/citus/build.sh`` builds it).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
from faults.cluster import Cluster, ClusterError, _bindir
from pg_schemas import with_query

DATABASE = "querator"
"""The database the Citus tests use, on every node."""
WORKERS = 2
"""How many worker nodes the cluster has."""
CITUS_SETTINGS = {
    "shared_preload_libraries": "citus",
    "citus.enable_schema_based_sharding": "on",
    "max_prepared_transactions": "100",
    "citus.max_client_connections": "-1",
    "wal_level": "logical",
    "citus.enable_stat_counters": "on",
}
"""The server settings every node starts with (beyond the throwaway cluster's own);
``wal_level = logical`` lets Citus move a schema while it takes writes, and the
stat counters tell single-node statements from multi-node ones (the placement audit)."""


def citus_installed() -> bool:
    """Whether the Citus extension is installed into the PostgreSQL whose
    initdb the throwaway clusters use."""
    try:
        bindir = _bindir()
    except ClusterError:
        return False
    pg_config = bindir / "pg_config"
    if not pg_config.exists():
        return False
    libdir = subprocess.run(
        [str(pg_config), "--pkglibdir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return bool(libdir) and (Path(libdir) / "citus.so").exists()


class CitusNode(Cluster):
    """One node of the cluster: a throwaway server with Citus preloaded."""

    def _server_options(self) -> str:
        settings = " ".join(f"-c {name}={value}" for name, value in CITUS_SETTINGS.items())
        return f"{super()._server_options()} {settings}"

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Run one statement in the tests' database of this node; its rows (if any)."""
        with psycopg.connect(self.dsn, connect_timeout=5, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return list(cursor.fetchall()) if cursor.description else []


@dataclass
class CitusCluster:
    """The coordinator and its workers; see the module docstring."""

    coordinator: CitusNode
    workers: list[CitusNode]
    counted: tuple[int, int] = (0, 0)
    """Single- and multi-shard executions zeroed by :meth:`reset_executions` so
    far (:meth:`session_executions` adds them back)."""

    @classmethod
    def create(cls) -> CitusCluster:
        """Make, start and join the nodes; ClusterError when any step fails."""
        nodes: list[CitusNode] = []
        try:
            for _ in range(1 + WORKERS):
                node = CitusNode.create(DATABASE)
                assert isinstance(node, CitusNode)
                nodes.append(node)
                node.execute("CREATE EXTENSION IF NOT EXISTS citus")
            coordinator, workers = nodes[0], nodes[1:]
            coordinator.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,)
            )
            for worker in workers:
                coordinator.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))
        except BaseException:
            for node in nodes:
                node.destroy()
            raise
        return cls(coordinator, workers)

    @property
    def dsn(self) -> str:
        """The tests' database on the coordinator (where querator connects)."""
        return self.coordinator.dsn

    def url(self, schema: str) -> str:
        """A querator URL on the coordinator whose tables live in ``schema``
        (a distributed schema: Citus places it on one worker)."""
        return with_query(self.dsn, schema=schema)

    def node_of(self, schema: str) -> int:
        """The port of the worker node holding ``schema``'s tables."""
        rows = self.coordinator.execute(
            "SELECT DISTINCT nodeport FROM citus_shards"
            " WHERE citus_table_type = 'schema' AND table_name::text LIKE %s",
            (f"{schema}.%",),
        )
        if len(rows) != 1:
            raise ClusterError(f"schema {schema!r} is on {len(rows)} nodes: {rows}")
        return int(str(rows[0][0]))

    def executions(self) -> tuple[int, int]:
        """The statements the coordinator routed to one shard, and to several,
        in the tests' database since the last :meth:`reset_executions`."""
        [(single, multi)] = self.coordinator.execute(
            "SELECT query_execution_single_shard, query_execution_multi_shard"
            " FROM citus_stat_counters WHERE name = current_database()"
        )
        return int(str(single)), int(str(multi))

    def session_executions(self) -> tuple[int, int]:
        """Like :meth:`executions`, over the cluster's whole life: the suite's
        placement audit (tests/conftest.py reads it when the cluster stops)."""
        single, multi = self.executions()
        return self.counted[0] + single, self.counted[1] + multi

    def reset_executions(self) -> None:
        """Zero the coordinator's counters of the tests' database (what they held
        stays in :meth:`session_executions`)."""
        self.counted = self.session_executions()
        self.coordinator.execute(
            "SELECT citus_stat_counters_reset(oid) FROM pg_database"
            " WHERE datname = current_database()"
        )

    def two_phase_commits(self) -> dict[str, set[int]]:
        """The transactions the coordinator committed in two phases and has not
        yet cleaned up (``pg_dist_transaction``), each with the node groups it
        prepared on (a gid is ``citus_<group>_<pid>_<transaction>_<n>``)."""
        found: dict[str, set[int]] = {}
        for gid, group in self.coordinator.execute("SELECT gid, groupid FROM pg_dist_transaction"):
            found.setdefault(str(gid).rsplit("_", 1)[0], set()).add(int(str(group)))
        return found

    def destroy(self) -> None:
        """Stop every node and remove its directory (idempotent)."""
        for node in [self.coordinator, *self.workers]:
            node.destroy()
