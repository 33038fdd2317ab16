"""Delivering NOTIFY wakeups from a dedicated connection, reconnecting on loss."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import anyio
import psycopg
from psycopg import sql

from querator.queue.backends.base import WakeCallback
from querator.queue.backends.postgres import statements as stmt

MIN_BACKOFF: Final = 0.1
"""Seconds before the first reconnection attempt."""
MAX_BACKOFF: Final = 2.0
"""Longest wait between reconnection attempts."""
IDLE_CHECK: Final = 30.0
"""Seconds without a notification after which the connection is pinged."""


async def listen_forever(
    conninfo: str, names: stmt.Names, on_wake: WakeCallback, on_ready: Callable[[], None]
) -> None:
    """Call ``on_wake(queue_name)`` for each notification until cancelled, and
    ``on_ready()`` each time LISTEN is in place (notifications sent while the
    connection was down or not yet listening are lost: the service then has
    every waiter look again).
    """
    delay = MIN_BACKOFF
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.Error:
            await anyio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF)
            continue
        try:
            await conn.execute(stmt.LISTEN.format(channel=sql.Identifier(names.channel)))
            delay = MIN_BACKOFF
            on_ready()
            await _deliver(conn, on_wake)
        except psycopg.Error:
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()
        await anyio.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF)


async def _deliver(conn: psycopg.AsyncConnection[Any], on_wake: WakeCallback) -> None:
    """Hand notifications to ``on_wake``; ping when idle so a dead link is noticed."""
    while True:
        async for note in conn.notifies(timeout=IDLE_CHECK):
            on_wake(note.payload)
        await conn.execute(stmt.PING)
