"""Sagas of the chaos test, and a worker process serving them.

Usage: python saga_chaos_worker.py URL LEDGER CLIENT_ID

A ``chaos.transfer`` saga moves ``amount`` along a chain of accounts in four
steps (debit A, credit B, debit B, credit C); each step fails for good with a
probability of ``FAIL_RATE`` (decided from its run and position, so every
attempt of a step agrees). The accounts live in the SQLite file ``LEDGER``:
every change is applied once per key (run, position, do/undo) and logged in
``events`` in the same local transaction, so a step re-run after a crash
(AEOD) never applies twice, and the log is the order effects happened in.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

from querator import Querator
from querator.workflows import RetryPolicy, Worker, saga, step

QUEUE = "chaos.sagas"
ACCOUNTS = ("A", "B", "C")
INITIAL = 1_000_000
FAIL_RATE = 0.2
CHAIN = (("A", -1), ("B", 1), ("B", -1), ("C", 1))
"""(account, sign) of each of the four steps."""


def ledger_path() -> str:
    return os.environ["CHAOS_LEDGER"]


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def create_ledger(path: str) -> None:
    with connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL);
            CREATE TABLE applied (key TEXT PRIMARY KEY);
            CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL,
                                 kind TEXT NOT NULL, position INTEGER NOT NULL);
            """
        )
        conn.executemany("INSERT INTO accounts VALUES (?, ?)", [(a, INITIAL) for a in ACCOUNTS])


def apply(run: str, kind: str, position: int, account: str, delta: int) -> None:
    """Change ``account`` by ``delta`` once for (run, kind, position), logging it."""
    conn = connect(ledger_path())
    try:
        for _ in range(100):
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError:
                time.sleep(0.05)
        key = f"{run}/{kind}/{position}"
        if conn.execute("INSERT OR IGNORE INTO applied VALUES (?)", (key,)).rowcount == 1:
            conn.execute(
                "UPDATE accounts SET balance = balance + ? WHERE name = ?", (delta, account)
            )
            conn.execute(
                "INSERT INTO events (run, kind, position) VALUES (?, ?, ?)", (run, kind, position)
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


def fails(run: str, position: int) -> bool:
    digest = hashlib.sha256(f"{run}/{position}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < FAIL_RATE


@step(name="chaos.move", retry=RetryPolicy(max_attempts=2, initial=0.01, max_delay=0.05))
def move(run: str, position: int, amount: int) -> int:
    if fails(run, position):
        raise RuntimeError(f"injected failure of {run} step {position}")
    account, sign = CHAIN[position]
    apply(run, "do", position, account, sign * amount)
    return sign * amount


@move.compensate(
    name="chaos.unmove", retry=RetryPolicy(max_attempts=0, initial=0.05, max_delay=0.5)
)
def unmove(run: str, position: int, amount: int, delta: int) -> None:
    account, _ = CHAIN[position]
    apply(run, "undo", position, account, -delta)


@saga(name="chaos.transfer", queue=QUEUE)
def transfer(run: str, amount: int) -> int:
    for position in range(len(CHAIN)):
        move(run, position, amount)
    return amount


def main() -> None:
    url, ledger, client_id = sys.argv[1:4]
    os.environ["CHAOS_LEDGER"] = ledger
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Querator(url, maintenance_interval=0.5) as q:
        Worker(q, [transfer, move], concurrency=8, client_id=client_id, poll_timeout=1.0).run()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
