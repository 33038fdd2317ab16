"""Past the probe limit the depth is an estimate: within its stated bound per store."""

from __future__ import annotations

from pathlib import Path

import psycopg

from querator import Item, Querator


def test_postgres_estimates_the_depth_from_the_planner_statistics(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, qname: str
) -> None:
    """Bound: after an ANALYZE (autovacuum's, here the test's), within 10 %
    (the planner's row estimate scaled to the table's current pages)."""
    with Querator(pg_schema_url) as q:
        q.create_queue(qname)
        for _ in range(6):
            q.produce(qname, [Item(payload=b"x" * 200) for _ in range(500)])
        before = q.gauges(qname, limit=100)
        assert not before.exact
        assert before.depth >= 100  # never analysed: the count so far, a lower bound
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            table = f"q{q.get_queue(qname).queue_id}_p0"
            conn.execute(f'ANALYZE "{pg_schema}"."{table}"')
        estimated = q.gauges(qname, limit=100).depth
        assert abs(estimated - 3000) <= 300, estimated
        # growth after the ANALYZE is seen through the table's pages
        for _ in range(6):
            q.produce(qname, [Item(payload=b"x" * 200) for _ in range(500)])
        grown = q.gauges(qname, limit=100).depth
        assert abs(grown - 6000) <= 600, grown
        assert q.stats(qname).total == 6000


def test_sqlite_reads_the_span_of_seqs_an_upper_bound(tmp_path: Path, qname: str) -> None:
    """Bound: between the true depth and the span of item seqs (exact when items
    leave in the order they came)."""
    with Querator(f"sqlite:///{tmp_path}/q.db") as q:
        q.create_queue(qname)
        q.produce(qname, [Item(payload=b"x") for _ in range(300)])
        assert q.gauges(qname, limit=50).depth == 300
        batch = q.lease(qname, client_id="w1", batch_size=100)
        q.complete(qname, batch[:50])  # the first 50 leave: still exact
        assert q.gauges(qname, limit=50).depth == 250
        q.complete(qname, batch[60:])  # a hole of 40 in the middle
        depth = q.gauges(qname, limit=50).depth
        assert 210 <= depth <= 250
        assert q.stats(qname).total == 210
