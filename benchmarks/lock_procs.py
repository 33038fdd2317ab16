"""Processes of the ``locks`` scenario: each loops acquire + release until its
window ends and reports how many it did. Top-level functions, for the
``spawn`` start method."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Barrier
from typing import Any

import psycopg

from querator import Querator
from querator.locks import Semaphore


def reporting(loop: Callable[..., int], args: tuple[Any, ...], results: SimpleQueue[int]) -> None:
    """Run ``loop(*args)`` and put its count on ``results`` (-1 when it failed,
    so the parent never waits for a count that will not come)."""
    try:
        results.put(loop(*args))
    except BaseException:
        results.put(-1)
        raise


def querator_loop(dsn: str, name: str, limit: int, seconds: float, start: Barrier) -> int:
    """Acquire + release a permit of semaphore ``name`` for ``seconds``."""
    with Querator(dsn) as q:
        sem = Semaphore(q, name, limit)
        sem.release(sem.acquire_permit())  # warm: statements prepared, renewer started
        start.wait()
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            sem.release(sem.acquire_permit())
            done += 1
    return done


def advisory_loop(dsn: str, keys: int, seconds: float, start: Barrier) -> int:
    """The same with PostgreSQL session advisory locks: ``keys`` locks stand for
    a semaphore of ``keys`` (try each, else wait on one at random)."""
    rng = random.Random()
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as conn:
        start.wait()
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            key = _take(conn, keys, rng)
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            done += 1
    return done


def _take(conn: psycopg.Connection[Any], keys: int, rng: random.Random) -> int:
    for key in range(1, keys + 1):
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if got and got[0]:
            return key
    key = rng.randint(1, keys)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    return key
