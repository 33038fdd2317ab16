"""A throwaway PostgreSQL cluster the fault tests start, break and remove.

``Cluster.create()`` runs ``initdb`` in a temporary directory (as a non-root
user when we are root: initdb refuses root), starts the server on a free
127.0.0.1 port with trust authentication, ``fsync=off`` and small buffers, and
creates the database the tests use. Its methods are the faults: restarts
(``fast`` or ``immediate``), an outage (``stop`` then ``start``), terminated
backends, and a database switched to read-only (or its sessions given a 1 ms
``statement_timeout``) for a few seconds.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psycopg
from pg_schemas import with_query
from psycopg import sql

DATABASE = "faults"
"""The database the tests use (the admin connections use ``postgres``)."""
ROLE = "root"
"""The superuser initdb creates (``-U``): the tests connect as this role."""
OWNER_FALLBACK = "querator-pg"
"""The system user created to own the cluster when we are root and ``postgres`` is missing."""
START_TIMEOUT = 60.0
"""Seconds pg_ctl and the readiness checks wait for the server."""

ShutdownMode = Literal["smart", "fast", "immediate"]


class ClusterError(RuntimeError):
    """The cluster could not be created, started or changed."""


def _bindir() -> Path:
    """The directory holding initdb and pg_ctl, newest PostgreSQL version first."""

    def version(path: str) -> tuple[int, ...]:
        number = Path(path).parent.name
        return tuple(int(part) for part in number.split(".") if part.isdigit())

    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(found) / "initdb").exists() and (Path(found) / "pg_ctl").exists():
            return Path(found)
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(initdb).parent
    raise ClusterError("no initdb/pg_ctl found (/usr/lib/postgresql/*/bin or on PATH)")


def _owner() -> str | None:
    """Who owns the cluster: ourselves (None) unless we are root; then ``postgres``
    if it exists, else a system user created for the purpose."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", OWNER_FALLBACK):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OWNER_FALLBACK],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        raise ClusterError(f"useradd {OWNER_FALLBACK} failed: {made.stderr.strip()}")
    return OWNER_FALLBACK


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"({path} does not exist)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ReadOnlyWindow:
    """A database switched to read-only by a background thread.

    ``began`` and ``ended`` are wall-clock times (``time.time()``): when the
    setting went on (and the sessions were cut), and when it went off again.
    """

    seconds: float
    thread: threading.Thread | None = None
    began: float | None = None
    ended: float | None = None
    terminated: int = 0
    error: BaseException | None = None
    on: threading.Event = field(default_factory=threading.Event)

    def join(self, timeout: float) -> float:
        """Wait for the window to close; the wall-clock time it closed."""
        assert self.thread is not None
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise ClusterError(f"the read-only window did not close within {timeout}s")
        if self.error is not None:
            raise ClusterError(f"the read-only toggle failed: {self.error!r}") from self.error
        assert self.ended is not None
        return self.ended


class Cluster:
    """One throwaway PostgreSQL server; see the module docstring."""

    def __init__(self, root: Path, bindir: Path, owner: str | None, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.bindir = bindir
        self.owner = owner
        self.port = port
        self.database = DATABASE
        self._destroyed = False

    # -- creation -------------------------------------------------------------

    @classmethod
    def create(cls, database: str = DATABASE) -> Cluster:
        """initdb, start and create ``database``; ClusterError when any step fails."""
        bindir, owner = _bindir(), _owner()
        root = Path(tempfile.mkdtemp(prefix="querator-faults-"))
        root.chmod(0o755)
        if owner is not None:
            shutil.chown(root, user=owner)
        cluster = cls(root, bindir, owner, _free_port())
        try:
            cluster._pg(
                "initdb",
                "-D",
                str(cluster.data),
                "-U",
                ROLE,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                what="initdb",
            )
            for attempt in range(3):  # a free port can be taken before the server binds it
                try:
                    cluster.start()
                    break
                except ClusterError:
                    if attempt == 2 or "could not bind" not in _tail(cluster.log, 200):
                        raise
                    cluster.port = _free_port()
            with psycopg.connect(cluster.admin_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            cluster.database = database
            cluster.wait_ready()
        except BaseException:
            cluster.destroy()
            raise
        return cluster

    @property
    def dsn(self) -> str:
        """The tests' database, as the superuser ``root``."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{self.database}"

    @property
    def admin_dsn(self) -> str:
        """The ``postgres`` database: the faults are driven from here."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/postgres"

    def url(self, schema: str) -> str:
        """A querator URL whose tables live in ``schema`` of the tests' database."""
        return with_query(self.dsn, schema=schema)

    # -- plumbing -------------------------------------------------------------

    def _pg(self, program: str, *args: str, what: str) -> None:
        """Run a PostgreSQL program as the owner; ClusterError with its output on failure."""
        command = [str(self.bindir / program), *args]
        if self.owner is not None:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, check=False, timeout=120
        )
        if done.returncode != 0:
            raise ClusterError(
                f"{what} failed (exit {done.returncode}): {done.stdout}{done.stderr}\n"
                f"server log:\n{_tail(self.log)}"
            )

    def _server_options(self) -> str:
        return " ".join(
            [
                f"-p {self.port}",
                f"-k {self.root}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=off",
                "-c shared_buffers=16MB",
                "-c max_connections=200",
            ]
        )

    def _ctl(self, action: str, *args: str) -> None:
        self._pg(
            "pg_ctl",
            action,
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(int(START_TIMEOUT)),
            *args,
            what=f"pg_ctl {action}",
        )

    def accepts(self) -> bool:
        """Whether the server accepts a connection and a query now."""
        try:
            with psycopg.connect(self.admin_dsn, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until the server accepts connections; ClusterError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.accepts():
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"the server did not accept connections within {timeout}s:\n{_tail(self.log)}"
                )
            time.sleep(0.05)

    def _admin(self, statement: sql.SQL | sql.Composed) -> list[tuple[object, ...]]:
        """Run one statement from a fresh admin connection; its rows (if any)."""
        with psycopg.connect(self.admin_dsn, connect_timeout=5, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []

    # -- faults ---------------------------------------------------------------

    def start(self) -> None:
        """Start the server (after :meth:`stop`); returns once it accepts connections."""
        self._ctl("start", "-o", self._server_options())
        self.wait_ready()

    def stop(self, mode: ShutdownMode = "fast") -> None:
        """Stop the server (``pg_ctl stop -m mode``): every client loses its connections."""
        self._ctl("stop", "-m", mode)

    def restart(self, mode: ShutdownMode = "fast") -> None:
        """``pg_ctl restart -m mode``; returns once the server accepts connections again.

        ``fast`` rolls back open transactions and checkpoints; ``immediate``
        kills the server as a crash would, and the restart runs crash recovery.
        """
        self._ctl("restart", "-m", mode, "-o", self._server_options())
        self.wait_ready()

    def running(self) -> bool:
        """Whether the postmaster is up (``pg_ctl status``)."""
        try:
            self._pg("pg_ctl", "status", "-D", str(self.data), what="pg_ctl status")
        except ClusterError:
            return False
        return True

    def terminate_backends(self, database: str | None = None) -> int:
        """``pg_terminate_backend`` every other client backend (of ``database``, if
        given), from a fresh connection; how many were terminated."""
        query = sql.SQL(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " AND ({database}::text IS NULL OR datname = {database})"
        ).format(database=sql.Literal(database))
        rows = self._admin(query)
        return int(str(rows[0][0])) if rows else 0

    def set_read_only(self, on: bool) -> None:
        """Make the tests' database read-only for sessions started from now on (or not)."""
        name = sql.Identifier(self.database)
        if on:
            self._admin(
                sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(name)
            )
        else:
            self._admin(
                sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(name)
            )

    def set_statement_timeout(self, timeout: str | None) -> None:
        """Give the tests' role a ``statement_timeout`` in the tests' database for
        sessions started from now on (None: take it away)."""
        role, name = sql.Identifier(ROLE), sql.Identifier(self.database)
        if timeout is None:
            self._admin(
                sql.SQL("ALTER ROLE {} IN DATABASE {} RESET statement_timeout").format(role, name)
            )
        else:
            self._admin(
                sql.SQL("ALTER ROLE {} IN DATABASE {} SET statement_timeout = {}").format(
                    role, name, sql.Literal(timeout)
                )
            )

    def set_system(self, setting: str, value: str | None) -> None:
        """``ALTER SYSTEM SET setting = value`` (None: RESET) and reload the configuration."""
        name = sql.Identifier(setting)
        if value is None:
            self._admin(sql.SQL("ALTER SYSTEM RESET {}").format(name))
        else:
            self._admin(sql.SQL("ALTER SYSTEM SET {} = {}").format(name, sql.Literal(value)))
        self._admin(sql.SQL("SELECT pg_reload_conf()"))

    def read_only(self, seconds: float) -> ReadOnlyWindow:
        """Switch the tests' database to read-only for ``seconds``, in a background thread.

        The setting applies to new sessions, so the thread turns it on, then
        terminates every session of the database (clients reconnect into
        read-only sessions), waits ``seconds`` and turns it off again. Sessions
        opened meanwhile stay read-only until they end: that is the fault.
        Returns at once; ``window.on`` is set once the database is read-only.
        """
        return self.session_window(seconds, self.set_read_only)

    def statement_timeout(self, seconds: float) -> ReadOnlyWindow:
        """Give the tests' role ``statement_timeout = 1ms`` for ``seconds`` (as
        :meth:`read_only` does its setting): sessions opened meanwhile keep it."""
        return self.session_window(
            seconds, lambda on: self.set_statement_timeout("1ms" if on else None)
        )

    def session_window(self, seconds: float, turn: Callable[[bool], None]) -> ReadOnlyWindow:
        """``turn(True)``, cut every session of the tests' database, wait ``seconds``
        and ``turn(False)``, in a background thread (see :meth:`read_only`)."""
        window = ReadOnlyWindow(seconds)

        def toggle() -> None:
            try:
                turn(True)
                window.began = time.time()
                window.terminated = self.terminate_backends(self.database)
                window.on.set()
                time.sleep(seconds)  # the fault's duration, not a wait for a condition
            except BaseException as exc:
                window.error = exc
            finally:
                try:
                    turn(False)
                    window.ended = time.time()
                except BaseException as exc:
                    window.error = window.error or exc
                window.on.set()

        window.thread = threading.Thread(target=toggle, name="session-window", daemon=True)
        window.thread.start()
        return window

    # -- teardown -------------------------------------------------------------

    def heal(self) -> None:
        """Undo whatever a failed test left behind: start a stopped server, and
        make the database writable again."""
        if not self.running():
            self.start()
        self.set_read_only(False)
        self.set_statement_timeout(None)
        self.set_system("synchronous_standby_names", None)

    def destroy(self) -> None:
        """Stop the server at once and remove its directory (idempotent)."""
        if self._destroyed:
            return
        self._destroyed = True
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                self._pg(
                    "pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", what="stop"
                )
        shutil.rmtree(self.root, ignore_errors=True)
