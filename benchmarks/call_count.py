"""Python function calls per lease + complete pair: the hot path counted, not timed.

Timed runs on a shared machine vary by more than the changes they measure;
the number of Python calls (``sys.setprofile`` "call" events; C calls are not
counted) does not. ``python benchmarks/call_count.py URL [PAIRS] [BATCH]``
prints one JSON line: calls per lease + complete pair of one ``AsyncQuerator``
at ``BATCH`` items a lease (default 1), over ``PAIRS`` pairs (default 500)
after 50 of warm-up. ``TMP`` in URL is replaced by a temporary directory
(``sqlite:///TMP/q.db``). ``--profile`` prints the 25 functions with the most
own time (cProfile) instead.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
import uuid
from types import FrameType
from typing import Any

from querator import AsyncQuerator, Item


async def _pairs(q: AsyncQuerator, queue: str, pairs: int, batch: int) -> None:
    for _ in range(pairs):
        leased = await q.lease(queue, client_id="w", batch_size=batch)
        await q.complete(queue, leased)


async def _run(url: str, pairs: int, batch: int, profile: bool) -> None:
    queue = f"count-{uuid.uuid4().hex[:8]}"
    async with AsyncQuerator(url) as q:
        await q.create_queue(queue)
        items = [Item(payload=b"x" * 64) for _ in range(batch)]
        for _ in range(pairs + 50):
            await q.produce(queue, items)
        await _pairs(q, queue, 50, batch)
        calls = 0

        def count(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal calls
            if event == "call":
                calls += 1

        if profile:
            prof = cProfile.Profile()
            prof.enable()
            await _pairs(q, queue, pairs, batch)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        else:
            sys.setprofile(count)
            await _pairs(q, queue, pairs, batch)
            sys.setprofile(None)
            store = url.partition("?")[0]
            print(json.dumps({"url": store, "batch": batch, "calls": calls / pairs}))
        await q.delete_queue(queue, force=True)


def main(argv: list[str]) -> None:
    """Count (or profile) the pairs named on the command line."""
    profile = "--profile" in argv
    args = [a for a in argv if a != "--profile"]
    pairs = int(args[1]) if len(args) > 1 else 500
    batch = int(args[2]) if len(args) > 2 else 1
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(args[0].replace("TMP", tmp), pairs, batch, profile))


if __name__ == "__main__":
    main(sys.argv[1:])
