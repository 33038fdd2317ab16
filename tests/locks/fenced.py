"""A small store guarded by fencing tokens, shared by processes (a SQLite file):
a write carrying a token lower than the highest it has seen is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class FencedStore:
    """One value per key; each write names the writer's fencing token."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, token INTEGER, value TEXT)"
        )

    def write(self, key: str, token: int, value: str) -> bool:
        """Store ``value`` unless a write with a higher token came first."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute("SELECT token FROM kv WHERE key = ?", (key,)).fetchone()
            if row is not None and token < row[0]:
                return False
            self._db.execute(
                "INSERT INTO kv VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
                " SET token = excluded.token, value = excluded.value",
                (key, token, value),
            )
            return True
        finally:
            self._db.execute("COMMIT")

    def read(self, key: str) -> tuple[int, str] | None:
        """The last accepted (token, value) of ``key``."""
        row = self._db.execute("SELECT token, value FROM kv WHERE key = ?", (key,)).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def close(self) -> None:
        """Close the file."""
        self._db.close()
