"""Fixtures of the dashboard's browser tests: one Chromium per test module
(Debian's, driven by Playwright: never a downloaded browser), and a site per
backend — a ``querator serve`` process over a SQLite file or a PostgreSQL
schema of its own, tokens, and a worker thread serving the demo app."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import anyio
import pytest
from http_server import serve
from pg_schemas import drop_schema, with_query
from playwright.sync_api import Browser, sync_playwright
from worker_threads import serving

from dashboard.demo_app import create_queues, worker
from dashboard.sites import CHROMIUM, CHROMIUM_ARGS, TRACE_URL, Site
from querator import AsyncQuerator, Querator
from querator.dashboard.throughput import INTERVAL_ENV
from querator.dashboard.traces import TRACE_URL_ENV
from querator.http.auth import create_token


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, for the whole module."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `apt-get install -y chromium` (scripts/test.sh does it)",
            pytrace=False,
        )
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


async def _tokens(store: str) -> dict[str, str]:
    async with AsyncQuerator(store) as aq:
        return {
            scope: (await create_token(aq, f"{scope} tests", scope))[0]
            for scope in ("read", "write")
        }


def _opened(stack: ExitStack, backend: str, store: str, scratch: Path) -> Site:
    """Open the site's store, tokens, server and worker on ``stack``. Runs on a
    thread without an event loop (Playwright keeps one running in the test's)."""
    q = stack.enter_context(Querator(store))
    create_queues(q)
    tokens = anyio.run(_tokens, store)
    env = {TRACE_URL_ENV: TRACE_URL, INTERVAL_ENV: "1"}  # throughput sampled every second
    url = stack.enter_context(serve(store, env=env))
    stack.enter_context(serving(worker(q)))
    return Site(backend, url, store, q, tokens, scratch)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """A served store with tokens and a worker, per backend, for the whole module."""
    scratch = tmp_path_factory.mktemp("dashboard")
    schema = None
    if request.param == "sqlite":
        store = f"sqlite:///{scratch / 'shop.db'}"
    else:
        dsn = str(request.getfixturevalue("pg_dsn"))
        schema = f"t_{secrets.token_hex(8)}"
        store = with_query(dsn, schema=schema)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("ORDER_JOURNAL", str(scratch / "orders-journal.txt"))
    try:
        with ExitStack() as stack:
            opened = Site.off_loop(_opened, stack, request.param, store, scratch)
            try:
                yield opened
            finally:
                Site.off_loop(stack.close)
    finally:
        monkeypatch.undo()
        if schema is not None:
            drop_schema(str(request.getfixturevalue("pg_dsn")), schema)
