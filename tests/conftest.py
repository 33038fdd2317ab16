"""Fixtures shared by every test: PostgreSQL DSN, per-test stores, clients.

Every test gets a store of its own: a fresh PostgreSQL schema (``?schema=t_<hex>``,
dropped at teardown), a fresh SQLite file in ``tmp_path``, or a new ``memory://``
store. PostgreSQL is never skipped: without ``QUERATOR_TEST_DSN`` the tests
that need it fail (``scripts/test.sh`` finds or starts a server and sets it).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pg_schemas import drop_schema, with_query

if TYPE_CHECKING:
    from citus.cluster import CitusCluster
    from otel_sdk import Telemetry

    from querator import AsyncQuerator, Querator

BACKENDS = ["memory", "sqlite", "postgres", "citus"]
"""The stores the backend-parametrized tests (workflows, sagas, cron, locks, …)
run on. Their ``citus`` instances (a namespace on a Citus coordinator) run by
default only in :data:`CITUS_BY_DEFAULT`; ``QUERATOR_TEST_CITUS=1`` runs them all."""

CITUS_BY_DEFAULT: frozenset[str] = frozenset(
    {
        "conformance",  # the queue conformance suite, whole
        "workflows/test_engine_timers.py",  # durable timers, delayed starts
        "workflows/test_engine_fanout.py",  # gather past one lookup window
        "workflows/test_saga_core.py",  # compensations, cancels, deadlines
        "workflows/test_messages.py",  # send/recv, events, parked runs
        "workflows/test_continuation.py",  # competing workers: no step twice
    }
)
"""Where the ``citus`` instances run without ``QUERATOR_TEST_CITUS=1`` (paths
under tests/): the queue conformance suite and the workflow engine's write
paths, one module per kind (46 workflow tests). All 149 workflow tests on Citus
take about 4 minutes of ``-n 2`` time at load 16, too much beside the
conformance suite's 4 in CI."""


def _citus_by_default(path: Path) -> bool:
    relative = path.relative_to(Path(__file__).parent).as_posix()
    return any(relative == named or relative.startswith(f"{named}/") for named in CITUS_BY_DEFAULT)


SLOW_FIRST: tuple[str, ...] = (
    "spark/",  # a JVM per module, worker processes with their own JVMs, spark-submit
    "test_docs_blocks.py::test_block_runs_as_written[docs/spark.md",  # a JVM per block
    "http_api/test_openapi.py::test_fuzzed",  # ~30 s of generated requests
    "test_benchmarks_smoke.py",
    "webhooks/test_cli.py",
    "workflows/test_ops_cli.py",
    "workflows/test_two_apps_processes.py",
    "workflows/test_live_bodies.py",
    "workflows/test_continue_as_new.py",
    "tasks/test_task_processes.py",
    "tasks/test_tasks_cli.py",
)
"""Tests (node id prefixes, under tests/) that take 15-40 s each on an idle
machine: they run first. ``pytest -n 2`` hands tests out in collection order,
so a long test collected last keeps one worker busy while the other idles; run
first, they are spread over the workers and the run ends on short tests. (Not
tests/faults: their recovery bounds are measured beside ordinary tests, not
beside the Spark JVMs.)"""


def _slow_first(items: list[pytest.Item]) -> None:
    """Move the items of :data:`SLOW_FIRST` to the front (each group in its order)."""
    root = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        if not item.path.is_relative_to(root):
            return 1
        _, _, name = item.nodeid.partition("::")
        node = f"{item.path.relative_to(root).as_posix()}::{name}"
        return 0 if node.startswith(SLOW_FIRST) else 1

    items.sort(key=rank)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``citus`` instances outside :data:`CITUS_BY_DEFAULT` unless
    ``QUERATOR_TEST_CITUS=1``; run :data:`SLOW_FIRST` first."""
    _slow_first(items)
    if os.environ.get("QUERATOR_TEST_CITUS") == "1":
        return
    dropped: list[pytest.Item] = []
    kept: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_citus = callspec is not None and callspec.params.get("backend_name") == "citus"
        (dropped if on_citus and not _citus_by_default(item.path) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The PostgreSQL server to test against; fails (never skips) when unset."""
    dsn = os.environ.get("QUERATOR_TEST_DSN", "").strip()
    if not dsn:
        pytest.fail(
            "QUERATOR_TEST_DSN is not set: PostgreSQL tests cannot run. "
            "Run `bash scripts/test.sh`, which finds or starts a server, or set "
            "QUERATOR_TEST_DSN=postgresql://root@127.0.0.1:5432/test",
            pytrace=False,
        )
    return dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """The name of a fresh PostgreSQL schema for this test, dropped after it."""
    schema = f"t_{secrets.token_hex(8)}"
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A throwaway Citus cluster (a coordinator and two workers) for this session
    (this xdist worker), stopped and removed after it; see tests/citus/cluster.py."""
    from citus.cluster import CitusCluster, citus_installed
    from faults.cluster import ClusterError

    if not citus_installed():
        pytest.fail(
            "Citus is not installed: run `bash ../shared/citus/build.sh` (scripts/test.sh does)",
            pytrace=False,
        )
    try:
        made = CitusCluster.create()
    except ClusterError as exc:
        pytest.fail(f"could not make a throwaway Citus cluster: {exc}", pytrace=False)
    try:
        yield made
        # the placement audit of every test this session ran on the cluster: each
        # statement sent through the coordinator went whole to one node (Citus's
        # counters; a statement Citus splits into subplans counts once per
        # subplan, so reads over two schemas by subqueries are not seen here, and
        # two-phase records are not audited: namespace DDL commits on every node)
        single, multi = made.session_executions()
        if multi:
            pytest.fail(
                f"placement audit: {multi} statements of this session ran on several"
                f" Citus nodes ({single} on one)",
                pytrace=False,
            )
    finally:
        made.destroy()


@pytest.fixture
def citus_schema(citus: CitusCluster) -> Iterator[str]:
    """A fresh schema name on the Citus coordinator for this test (a distributed
    schema once the backend creates it), dropped after it."""
    schema = f"c_{secrets.token_hex(6)}"
    yield schema
    drop_schema(citus.dsn, schema)


CITUS_NAMESPACE = "conformance"
"""The namespace the tests' stores on Citus use (beside a fresh base schema per test)."""


@pytest.fixture
def citus_namespace_url(citus: CitusCluster, citus_schema: str) -> Iterator[str]:
    """A URL on the Citus coordinator naming a namespace of a fresh store: its
    schema (``<citus_schema>__conformance``, a distributed schema on one worker)
    is dropped after the test."""
    yield with_query(citus.url(citus_schema), namespace=CITUS_NAMESPACE)
    drop_schema(citus.dsn, f"{citus_schema}__{CITUS_NAMESPACE}")


@pytest.fixture
def pg_schema_url(pg_dsn: str, pg_schema: str) -> str:
    """A PostgreSQL URL naming the test's own schema (the backend creates its tables there)."""
    return with_query(pg_dsn, schema=pg_schema)


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Which backend this test instance runs against."""
    return str(request.param)


@pytest.fixture
def backend_url(backend_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of a fresh, empty store of the backend under test."""
    if backend_name == "memory":
        return "memory://"
    if backend_name == "sqlite":
        return f"sqlite:///{tmp_path / 'q.db'}"
    if backend_name == "citus":
        return str(request.getfixturevalue("citus_namespace_url"))
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def q(backend_url: str) -> Iterator[Querator]:
    """A sync client on the store under test."""
    from querator import Querator

    with Querator(backend_url) as client:
        yield client


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio."""
    return "asyncio"


@pytest.fixture
async def aq(backend_url: str, anyio_backend: str) -> AsyncIterator[AsyncQuerator]:
    """An async client on the store under test (use with ``@pytest.mark.anyio``)."""
    from querator import AsyncQuerator

    async with AsyncQuerator(backend_url) as client:
        yield client


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name unique to this test (derive others from it: f"{qname}-dead")."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{secrets.token_hex(3)}"


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """The in-memory OpenTelemetry SDK (installed for the rest of this worker
    process), sampling every span until the test ends."""
    from otel_sdk import install

    telemetry = install()
    yield telemetry
    telemetry.sampling.on = False
