"""The producer and the consumers of the queue fault tests, as OS processes.

Usage: python queue_proc.py produce URL QUEUE JOURNAL RATE
       python queue_proc.py consume URL QUEUE JOURNAL CLIENT_ID

Both run until SIGTERM and journal to JOURNAL, one flushed line per event,
each ending with the wall-clock time:

- ``produced SEQ ID T`` once ``produce`` returned the item's id. Item ``SEQ``
  has payload ``SEQ`` and dedup key ``sSEQ``; a produce that raised
  Unavailable is sent again with the same keys (the call is idempotent while
  the item is in the queue).
- ``done ID SEQ T`` once ``complete`` returned.
- ``unsure ID SEQ REASON T``: a ``complete`` raised Unavailable (its commit may
  or may not have happened), and sending it again found the item ``missing``:
  completed — by this consumer's lost commit, or by another consumer.
- ``conflict ID SEQ REASON T``: the lease ran out and someone else has the item.
- ``unavailable OP T``: OP raised Unavailable; the process backs off and goes on.
- ``abandoned ID SEQ T``: SIGTERM came while a complete kept raising Unavailable:
  its outcome is unknown (the test looks the item up).
- ``stopped T`` on SIGTERM, last.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import TextIO, TypeVar

from querator import Item, Querator
from querator.errors import Conflict, ConflictReason, RequestTimeout, Unavailable
from querator.queue.models import Leased

T = TypeVar("T")

BATCH = 5
"""Items per produce, and the lease batch size."""
LEASE_WAIT = 1.0
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0

STOPPING = threading.Event()
"""Set by SIGTERM: finish the call in hand (unless it cannot succeed), then exit."""


def _stop(signum: int, frame: FrameType | None) -> None:
    STOPPING.set()


def _line(journal: TextIO, *fields: object) -> None:
    journal.write(" ".join(str(f) for f in (*fields, f"{time.time():.6f}")) + "\n")


def _until_available(journal: TextIO, op: str, call: Callable[[], T]) -> T | None:
    """``call()`` until it does not raise Unavailable (None if stopped meanwhile)."""
    pause = BACKOFF_FIRST
    while True:
        try:
            return call()
        except Unavailable:
            _line(journal, "unavailable", op)
        if STOPPING.is_set():
            return None
        STOPPING.wait(pause)  # back off before trying again
        pause = min(pause * 2, BACKOFF_MAX)


def produce(q: Querator, queue: str, journal: TextIO, rate: float) -> None:
    seq = 0
    pace = BATCH / rate
    next_at = time.monotonic()
    while not STOPPING.is_set():
        batch = [Item(payload=str(n).encode(), dedup_key=f"s{n}") for n in range(seq, seq + BATCH)]
        ids = _until_available(journal, "produce", partial(q.produce, queue, batch))
        if ids is None:
            break
        for n, item_id in zip(range(seq, seq + BATCH), ids, strict=True):
            _line(journal, "produced", n, item_id)
        seq += BATCH
        next_at += pace
        STOPPING.wait(max(0.0, next_at - time.monotonic()))  # the producer's pace
        next_at = max(next_at, time.monotonic() - pace)  # no burst to catch up after an outage


def _finish(q: Querator, queue: str, journal: TextIO, batch: list[Leased]) -> None:
    """Complete ``batch``, journaling each item's outcome (see the module docstring)."""
    ambiguous = False
    pending = list(batch)
    pause = BACKOFF_FIRST
    while pending:
        try:
            q.complete(queue, pending)
        except Unavailable:
            _line(journal, "unavailable", "complete")
            ambiguous = True
            if STOPPING.is_set():
                for item in pending:
                    _line(journal, "abandoned", item.id, item.payload.decode())
                return
            STOPPING.wait(pause)  # back off before sending the same complete again
            pause = min(pause * 2, BACKOFF_MAX)
            continue
        except Conflict as exc:
            for item in pending:
                reason = exc.reasons.get(item.id)
                if reason is None:
                    continue
                verb = "unsure" if ambiguous and reason == ConflictReason.MISSING else "conflict"
                _line(journal, verb, item.id, item.payload.decode(), reason.value)
            pending = [item for item in pending if item.id not in exc.reasons]
            continue  # the rest are still ours: all or nothing, so nothing was changed
        for item in pending:
            _line(journal, "done", item.id, item.payload.decode())
        return


def consume(q: Querator, queue: str, journal: TextIO, client_id: str) -> None:
    pause = BACKOFF_FIRST
    while not STOPPING.is_set():
        try:
            batch = q.lease(queue, client_id=client_id, batch_size=BATCH, timeout=LEASE_WAIT)
        except RequestTimeout:
            continue
        except Unavailable:
            _line(journal, "unavailable", "lease")
            STOPPING.wait(pause)  # back off before leasing again
            pause = min(pause * 2, BACKOFF_MAX)
            continue
        pause = BACKOFF_FIRST
        _finish(q, queue, journal, batch)


def main() -> None:
    role, url, queue, journal_path, arg = sys.argv[1:6]
    signal.signal(signal.SIGTERM, _stop)
    with Querator(url) as q, open(journal_path, "a", buffering=1) as journal:
        if role == "produce":
            produce(q, queue, journal, float(arg))
        else:
            consume(q, queue, journal, arg)
        _line(journal, "stopped")


if __name__ == "__main__":
    main()
