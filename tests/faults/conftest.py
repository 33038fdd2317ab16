"""Fixtures of the fault tests: a throwaway PostgreSQL cluster per module.

The cluster is made with initdb on a free port (see :mod:`.cluster`). When it
cannot be made the tests fail, loudly: they never skip (the suite runs on
machines that have PostgreSQL's binaries).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from .cluster import Cluster, ClusterError
from .harness import REPORT


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "faults: database-fault tests on a throwaway PostgreSQL cluster"
    )
    REPORT.unlink(missing_ok=True)  # each run writes its own report lines


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A throwaway cluster for this module, destroyed after it."""
    try:
        made = Cluster.create()
    except ClusterError as exc:
        pytest.fail(f"could not make a throwaway PostgreSQL cluster: {exc}", pytrace=False)
    try:
        yield made
    finally:
        made.destroy()


@pytest.fixture
def fault_url(cluster: Cluster) -> Iterator[str]:
    """A querator URL on the cluster naming a schema of this test's own; the
    cluster is healed afterwards (running, writable) whatever the test left."""
    yield cluster.url(f"f_{secrets.token_hex(6)}")
    cluster.heal()
