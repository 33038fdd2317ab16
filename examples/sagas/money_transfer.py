"""Move money between accounts as sagas: debit, then credit; undo the debit on failure.

Run it with no server at all:  python examples/sagas/money_transfer.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.

The accounts live in tables of the example's own, in a SQLite file beside the
querator database (``<db>.bank.sqlite``). On PostgreSQL the same pattern
applies unchanged: keep the accounts in your own tables and make every change
idempotent as below.

Each change of a balance is applied **once per key** (transfer id + step):
the key is inserted into ``applied`` in the same local transaction as the
balance update, so a step that runs again (a worker died after the change but
before querator recorded the step: at-least-once execution) changes nothing
the second time. Transfer ``x3`` simulates exactly that crash; transfer ``x2``
credits a frozen account, so its debit is compensated. The total of all
balances is the same before and after.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import threading
from pathlib import Path

from querator import Querator
from querator.workflows import RetryPolicy, SagaFailed, Worker, saga, start, step

BANK = {"path": "bank.sqlite"}
"""Where the accounts live (set by main)."""
FROZEN = {"carol"}
_crashed: set[str] = set()


class AccountFrozen(Exception):
    """The account cannot receive money: retrying will not help."""


def bank() -> sqlite3.Connection:
    return sqlite3.connect(BANK["path"], timeout=30, isolation_level=None)


def create_bank(path: Path) -> None:
    path.unlink(missing_ok=True)
    BANK["path"] = str(path)
    conn = bank()
    conn.executescript(
        """
        CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL);
        CREATE TABLE applied (key TEXT PRIMARY KEY);
        INSERT INTO accounts VALUES ('alice', 10000), ('bob', 5000), ('carol', 0);
        """
    )
    conn.close()


def change(key: str, account: str, delta: int) -> bool:
    """Add ``delta`` to ``account`` once per ``key``; False when already applied."""
    conn = bank()
    try:
        conn.execute("BEGIN IMMEDIATE")
        fresh = conn.execute("INSERT OR IGNORE INTO applied VALUES (?)", (key,)).rowcount == 1
        if fresh:
            conn.execute(
                "UPDATE accounts SET balance = balance + ? WHERE name = ?", (delta, account)
            )
        conn.execute("COMMIT")
        return fresh
    finally:
        conn.close()


def balances() -> dict[str, int]:
    conn = bank()
    try:
        return dict(conn.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall())
    finally:
        conn.close()


QUICK = RetryPolicy(max_attempts=3, initial=0.05, max_delay=0.1)


@step(name="bank.debit", retry=QUICK)
def debit(transfer: str, account: str, cents: int) -> str:
    applied = change(f"{transfer}/debit", account, -cents)
    if transfer == "x3" and transfer not in _crashed:
        _crashed.add(transfer)  # the change is made; the "worker dies" before the record
        raise ConnectionError("simulated crash after the debit, before it was recorded")
    return "debited" if applied else "already debited (idempotent re-run)"


@debit.compensate(name="bank.refund", retry=RetryPolicy(max_attempts=0, initial=0.05))
def refund(transfer: str, account: str, cents: int, outcome: str) -> None:
    change(f"{transfer}/refund", account, cents)


@step(name="bank.credit", retry=RetryPolicy(max_attempts=3, initial=0.05, fail_on=(AccountFrozen,)))
def credit(transfer: str, account: str, cents: int) -> str:
    if account in FROZEN:
        raise AccountFrozen(f"account {account} is frozen")
    change(f"{transfer}/credit", account, cents)
    return "credited"


@saga(name="bank.transfer")
def transfer(transfer_id: str, source: str, target: str, cents: int) -> list[str]:
    return [debit(transfer_id, source, cents), credit(transfer_id, target, cents)]


TRANSFERS = [
    ("x1", "alice", "bob", 2500),
    ("x2", "bob", "carol", 1000),  # carol's account is frozen: the debit is refunded
    ("x3", "alice", "bob", 700),  # crashes after debiting: the re-run does not debit twice
]


def demo(path: Path) -> None:
    """Run the transfers, print the balances before and after."""
    path = path.resolve()
    path.unlink(missing_ok=True)
    create_bank(path.with_suffix(".bank.sqlite"))
    before = balances()
    print(f"before: {before}  total {sum(before.values())}")
    with Querator(f"sqlite:///{path}") as q:
        worker = Worker(q, [transfer, debit, credit], concurrency=4)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            for tid, source, target, cents in TRANSFERS:
                run = start(q, transfer, tid, source, target, cents, idempotency_key=tid)
                try:
                    steps = run.result(timeout=60)
                    outcome = ", ".join(steps)
                except SagaFailed as failed:
                    undone = ", ".join(c.split("@", maxsplit=1)[0] for c in failed.compensations)
                    outcome = f"{failed.error_type}: {failed.message}; undone: {undone}"
                print(f"{tid} {source:>5} -> {target:<5} {cents:>5}  {run.status():<12} {outcome}")
        finally:
            worker.stop()
            thread.join()
    after = balances()
    print(f"after:  {after}  total {sum(after.values())}")
    verdict = "conserved" if sum(after.values()) == sum(before.values()) else "NOT CONSERVED"
    print(f"total balance {verdict}")


def main() -> None:
    """Run the demo on ``argv[1]``, else on bank.db in a temporary directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "bank.db"))


if __name__ == "__main__":
    main()
