"""A running dashboard for the browser tests (see conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import Browser, Page, expect

from querator import Querator

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TRACE_URL = "http://127.0.0.1:9/trace/{trace_id}"
"""The tracing UI's URL template the sites' servers are given (QUERATOR_TRACE_URL)."""
IMAGES = Path(__file__).resolve().parent.parent.parent / "docs" / "img"


@dataclass
class Site:
    """A running dashboard over a store the test can also reach directly."""

    backend: str
    url: str
    """The server's base URL (``http://127.0.0.1:PORT``)."""
    store: str
    q: Querator
    tokens: dict[str, str]
    """Tokens by scope: ``read`` and ``write``."""
    scratch: Path

    @staticmethod
    def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a thread of its own: Playwright's sync API
        keeps an event loop running in the test's thread, where the sync
        Querator refuses to be called."""
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(fn, *args, **kwargs).result(timeout=120)

    def do(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`off_loop`, for a test's calls of the store."""
        return self.off_loop(fn, *args, **kwargs)

    def sign_in(self, browser: Browser, scope: str) -> Page:
        """A fresh browser context signed in with the token of ``scope``, on the runs page."""
        page = browser.new_context(base_url=self.url, viewport={"width": 1280, "height": 800})
        tab = page.new_page()
        tab.goto("/ui/runs")
        expect(tab).to_have_url(f"{self.url}/ui/login")
        tab.fill("input[name=token]", self.tokens[scope])
        tab.click("form.login button")
        expect(tab).to_have_url(f"{self.url}/ui/runs")
        return tab


@contextmanager
def reloaded(page: Page) -> Iterator[None]:
    """Wait, after the block, until the page is a new document (the one an
    action's form or redirect loads): the old one is marked, and a check of
    the old document (a live refresh can already show the change) is never
    taken for the new page's."""
    page.evaluate("document.body.dataset.stale = 'yes'")
    yield
    expect(page.locator("body[data-stale]")).to_have_count(0)


def shot(site: Site, page: Page, name: str) -> None:
    """Save the page as docs/img/dashboard-NAME.png (from the SQLite run only)."""
    if site.backend == "sqlite":
        page.screenshot(path=str(IMAGES / f"dashboard-{name}.png"), full_page=True)
