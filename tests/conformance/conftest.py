"""Fixtures of the conformance suite on top of tests/conftest.py.

The suite runs on two more backends here, ``http`` and ``http-protobuf``:
``q`` and ``aq`` are the HTTP clients of :mod:`querator.http`, talking to a
real ``querator serve`` process started for the test over its own PostgreSQL
schema, in JSON or in protobuf (Querator's calls; querator's own stay JSON);
``backend_url`` is that schema's URL, so a test's "other client"
(``Querator(backend_url)``, worker processes) is a library client of the same
store as the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from http_server import Forks

from querator import AsyncQuerator, Querator
from querator.clock import ManualClock
from querator.queue.client import QueueClient, SyncShell
from querator.queue.interface import AsyncQueueApi

from .helpers import START

HTTP_BACKENDS = {"http": "json", "http-protobuf": "protobuf"}
"""The HTTP backends and the encoding their clients send."""

CONFORMANCE_BACKENDS = ["memory", "sqlite", "postgres", *HTTP_BACKENDS, "citus"]
"""The backends the suite runs on. ``citus`` is the PostgreSQL backend on a
namespace (a distributed schema) through the coordinator of a throwaway Citus
cluster (tests/citus/cluster.py); Citus must be installed into the local
PostgreSQL (``bash ../shared/citus/build.sh``, which scripts/test.sh runs)."""


@pytest.fixture(params=CONFORMANCE_BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Which backend this test instance runs against (the store's, an HTTP one or ``citus``)."""
    return str(request.param)


@pytest.fixture(scope="session")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forks]:
    """The forker of this session's (this xdist worker's) test servers."""
    forker = Forks(tmp_path_factory.mktemp("servers"))
    yield forker
    forker.close()


@pytest.fixture
def server_url(
    backend_name: str, backend_url: str, request: pytest.FixtureRequest
) -> Iterator[str | None]:
    """The base URL of the test's own ``querator serve`` over its own store
    (None off the http backend)."""
    if backend_name not in HTTP_BACKENDS:
        yield None
        return
    forks: Forks = request.getfixturevalue("forks")
    with forks.serve(backend_url) as url:
        yield url


@pytest.fixture
def q(
    backend_url: str, backend_name: str, server_url: str | None
) -> Iterator[SyncShell[AsyncQueueApi]]:
    """A sync client on the store under test (over HTTP on the http backends):
    the same queue methods either way (the sync shell of an async client)."""
    if server_url is not None:
        from querator.http import Querator as HttpQuerator

        encoding = HTTP_BACKENDS[backend_name]
        with HttpQuerator(server_url, encoding=encoding) as http_client:
            yield http_client
        return
    with Querator(backend_url) as client:
        yield client


@pytest.fixture
async def aq(
    backend_url: str, backend_name: str, server_url: str | None, anyio_backend: str
) -> AsyncIterator[AsyncQueueApi]:
    """An async client on the store under test (over HTTP on the http backends)."""
    if server_url is not None:
        from querator.http import AsyncQuerator as HttpAsyncQuerator

        encoding = HTTP_BACKENDS[backend_name]
        async with HttpAsyncQuerator(server_url, encoding=encoding) as http_client:
            yield http_client
        return
    async with AsyncQuerator(backend_url) as client:
        yield client


@pytest.fixture
def q2(q: QueueClient, backend_url: str, backend_name: str) -> Iterator[QueueClient]:
    """A second client on the same store as ``q``.

    A memory:// URL opens a new, separate store each time, so on the memory
    backend the "other client" is ``q`` itself (used from another thread).
    """
    if backend_name == "memory":
        yield q
        return
    with Querator(backend_url) as client:
        yield client


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock standing at :data:`~.helpers.START`."""
    return ManualClock(START)


@pytest.fixture
def cq(backend_url: str, backend_name: str, clock: ManualClock) -> Iterator[Querator]:
    """A library client on the store under test, reading ``clock``."""
    if backend_name.startswith("http"):
        pytest.skip("a server keeps its store's clock; an HTTP client has none to give")
    with Querator(backend_url, clock=clock) as client:
        yield client


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """Threads for background calls; joined at teardown so none outlives the test."""
    with ThreadPoolExecutor(max_workers=8) as executor:
        yield executor


HTTP_CANNOT = {
    "test_a_silent_transaction_wakes_no_watcher": (
        "watch() waits on a client's in-process wakeup board; the HTTP API pushes "
        "nothing to its clients, so an HTTP client has no watch()"
    ),
}
"""Conformance tests that cannot apply to the HTTP client, and why."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip, on the http backends only, the tests named in HTTP_CANNOT."""
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in HTTP_CANNOT and item.name.endswith(("[http]", "[http-protobuf]")):
            item.add_marker(pytest.mark.skip(reason=HTTP_CANNOT[name]))
