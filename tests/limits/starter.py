"""A process that starts rate-limited work: one task per key, each acquiring
in a loop until the window ends, logging each admitted start.

Usage: python starter.py URL NAME N PER KEYS SECONDS LOG

Each line of LOG is ``<key> <admitted instant, seconds since the epoch, the
store's clock>``.
"""

from __future__ import annotations

import sys
import time

import anyio

from querator import AsyncQuerator
from querator.limits import AsyncRateLimiter, RateLimit


async def main(
    url: str, name: str, n: int, per: float, keys: int, seconds: float, log: str
) -> None:
    lines: list[str] = []
    async with AsyncQuerator(url) as q:
        limiter = AsyncRateLimiter(q, RateLimit(name, n, per=per))
        end = time.monotonic() + seconds

        async def starts(key: str) -> None:
            while time.monotonic() < end:
                try:
                    admitted = await limiter.acquire(key, timeout=max(0.0, end - time.monotonic()))
                except Exception:  # the window ended while waiting
                    return
                lines.append(f"{key} {admitted.timestamp()}")

        async with anyio.create_task_group() as tasks:
            for index in range(keys):
                tasks.start_soon(starts, f"tenant-{index}")
    with open(log, "a") as out:
        out.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    url, name, n, per, keys, seconds, log = sys.argv[1:]
    anyio.run(main, url, name, int(n), float(per), int(keys), float(seconds), log)
