"""The processes of the ``webhooks`` scenario: a local receiver and a delivery worker.

The receiver is a bare asyncio HTTP/1.1 server (keep-alive, no framework, so
it costs the worker's measurements as little as possible): ``/hang/...``
answers after 30 s, every other path at once with 200. ``GET /stats`` returns
what it counted, per path: requests, first and last arrival (``time.time()``),
and the arrival time of each ``webhook-id``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

HANG_SECONDS = 30.0


class Counts:
    """What the receiver got."""

    def __init__(self) -> None:
        self.paths: dict[str, list[float]] = {}
        """Path -> [count, first, last]."""
        self.arrivals: dict[str, float] = {}

    def add(self, path: str, msg_id: str | None) -> None:
        now = time.time()
        got = self.paths.setdefault(path, [0, now, now])
        got[0] += 1
        got[2] = now
        if msg_id is not None:
            self.arrivals.setdefault(msg_id, now)

    def document(self) -> bytes:
        return json.dumps({"paths": self.paths, "arrivals": self.arrivals}).encode()


async def _connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counts: Counts
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
            await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/stats":
                body = counts.document()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                continue
            counts.add(path, headers.get("webhook-id"))
            if path.startswith("/hang"):
                await asyncio.sleep(HANG_SECONDS)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _receive() -> None:
    counts = Counts()
    server = await asyncio.start_server(
        lambda r, w: _connection(r, w, counts), "127.0.0.1", 0, backlog=1024
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def receive() -> None:
    """Run the receiver until killed; prints its port first."""
    asyncio.run(_receive())


def deliver(dsn: str, concurrency: int) -> None:
    """Run a delivery worker until SIGTERM."""
    from querator import Querator
    from querator.webhooks import DeliveryWorker, WebhookSettings

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    settings = WebhookSettings(allow_private=True, timeout=HANG_SECONDS + 30)
    with Querator(dsn) as q:
        DeliveryWorker(q, settings, concurrency=concurrency, shutdown_grace=2.0).run()
