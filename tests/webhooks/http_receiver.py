"""A real HTTP receiver for the webhook tests: Starlette under uvicorn on
127.0.0.1 (an ephemeral port), in a thread of the test process.

Paths choose the answer: ``/ok`` 200, ``/fail`` 500, ``/gone`` 410,
``/limited`` 429 with ``Retry-After: <after>``, ``/flaky/<n>`` 500 for the
first ``n`` requests of each ``webhook-id`` then 200, ``/slow/<ms>`` 200 after
a pause, ``/hang`` never answers (until the client gives up), ``/held`` waits
until :meth:`Receiver.release` is called, then 200.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

FIXED = {
    "ok": (200, "thanks"),
    "fail": (500, "boom " * 1000),
    "gone": (410, "gone"),
    "limited": (429, "slow down"),
}
"""Paths answered at once: status and body (every answer carries Retry-After)."""


@dataclass(frozen=True)
class Received:
    """One request as the receiver got it."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    """The receiving app and what it got."""

    def __init__(self, retry_after: str = "1") -> None:
        self.received: list[Received] = []
        self.retry_after = retry_after
        self.hanging = 0
        """Requests to /hang and /held in progress now."""
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.port = 0
        self.app = Starlette(routes=[Route("/{path:path}", self._answer, methods=["POST"])])

    def url(self, path: str) -> str:
        """The receiver's URL for ``path`` (``ok``, ``fail``, ``flaky/2`` …)."""
        return f"http://127.0.0.1:{self.port}/{path}"

    def at(self, path: str) -> list[Received]:
        """Requests received on ``/path``."""
        with self._lock:
            return [r for r in self.received if r.path == path]

    def release(self) -> None:
        """Let requests to /held (now and later) answer 200."""
        self._release.set()

    async def _answer(self, request: Request) -> Response:
        path = request.path_params["path"]
        body = await request.body()
        got = Received(path, dict(request.headers), body, time.time())
        with self._lock:
            self.received.append(got)
            self._seen[f"{path}/{got.headers.get('webhook-id')}"] += 1
            seen = self._seen[f"{path}/{got.headers.get('webhook-id')}"]
        kind, _, arg = path.partition("/")
        if kind in FIXED:
            status, text = FIXED[kind]
            return PlainTextResponse(text, status, {"retry-after": self.retry_after})
        if kind == "flaky":
            ready = seen > int(arg)
            return PlainTextResponse("ok" if ready else "not yet", 200 if ready else 500)
        if kind == "slow":
            await asyncio.sleep(int(arg) / 1000)
            return PlainTextResponse("slowly")
        return await self._wait(kind)

    async def _wait(self, kind: str) -> Response:
        self.hanging += 1
        try:
            while kind == "hang" or not self._release.is_set():
                await asyncio.sleep(0.01)
        finally:
            self.hanging -= 1
        return PlainTextResponse("released")


@contextmanager
def serving(
    receiver: Receiver | None = None, tls: tuple[str, str] | None = None
) -> Iterator[Receiver]:
    """Run a receiver for the block (HTTPS with ``tls``: certificate and key
    files); stopped (connections dropped) at its end."""
    receiver = receiver or Receiver()
    certfile, keyfile = tls or (None, None)
    config = uvicorn.Config(
        receiver.app,
        host="127.0.0.1",
        port=0,
        log_level="error",
        lifespan="off",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test receiver did not start")
        time.sleep(0.01)
    receiver.port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield receiver
    finally:
        receiver.release()
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout=10)
