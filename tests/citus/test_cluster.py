"""The throwaway Citus cluster itself: the extension on every node, the workers joined."""

from __future__ import annotations

from .cluster import WORKERS, CitusCluster


def test_the_coordinator_knows_its_workers(citus: CitusCluster) -> None:
    rows = citus.coordinator.execute(
        "SELECT nodeport FROM pg_dist_node WHERE isactive AND noderole = 'primary'"
        " AND shouldhaveshards ORDER BY nodeport"
    )
    assert sorted(int(str(r[0])) for r in rows) == sorted(w.port for w in citus.workers)
    assert len(rows) == WORKERS
    for node in [citus.coordinator, *citus.workers]:
        assert node.execute("SHOW citus.enable_schema_based_sharding") == [("on",)]
        assert node.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
