"""A commit that waits for a synchronous standby that is gone (a promoted standby
still naming one, say): the client cuts the call off one second past its
statement deadline, says so once, and the same call goes through once commits
are acknowledged again."""

from __future__ import annotations

import logging
import time

import pytest
from pg_schemas import with_query

from querator import Item, Querator
from querator.errors import Unavailable

from .cluster import Cluster
from .harness import report

pytestmark = pytest.mark.faults

DEADLINE = 1.0
SLACK = 4.0
"""Seconds past the deadline a cut-off call may take: the one-second margin, and
the driver's own cancellation (bounded) on a busy machine."""


@pytest.mark.timeout(120)
def test_a_commit_waiting_for_a_missing_standby_is_cut_off(
    cluster: Cluster, fault_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="querator.postgres")
    url = with_query(fault_url, statement_deadline=str(DEADLINE))
    with Querator(url) as q:
        q.create_queue("jobs")
        cluster.set_system("synchronous_standby_names", "ghost")
        try:
            began = time.monotonic()
            with pytest.raises(Unavailable, match="no answer: cut off, outcome unknown"):
                q.produce("jobs", [Item(payload=b"a", dedup_key="a")])
            took = time.monotonic() - began
        finally:
            cluster.set_system("synchronous_standby_names", None)
        # The commit was cut off, not undone: sending it again adds nothing twice.
        q.produce("jobs", [Item(payload=b"a", dedup_key="a")])
        assert q.stats("jobs").total == 1
    report("blocked-commit", {"deadline_s": DEADLINE, "cut_off_s": f"{took:.2f}"})
    assert DEADLINE <= took < DEADLINE + SLACK, took
    blocked = [r for r in caplog.records if "calls fail Unavailable" in r.getMessage()]
    assert len(blocked) == 1
