"""Helpers of the operations tests: worker processes, their logs, shared stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from polling import wait_for

WORKER_SCRIPT = Path(__file__).with_name("ops_worker.py")
STACKS_WAIT = 3.0
"""Seconds a hung worker gets to write its threads' stacks (SIGUSR1) before the kill."""
STACKS_MARK = "most recent call first"
"""In every stack faulthandler writes."""


def durable_url_for(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str:
    """A store other processes can share: a SQLite file or a PostgreSQL schema."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'ops.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


@dataclass
class WorkerProc:
    """A worker process and where its output goes."""

    name: str
    proc: subprocess.Popen[bytes]
    stderr_path: Path

    def stderr(self) -> str:
        """What the process logged so far."""
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM once the worker serves (before that, SIGTERM's default action
        would end it with -15), then wait for the exit code."""
        wait_for(
            lambda: self.proc.poll() is not None or "serving" in self.stderr(),
            timeout=timeout,
            message=f"worker {self.name} to start serving",
        )
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 30.0) -> int:
        """The exit code (after ``timeout``: dump its threads' stacks, kill, fail)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"worker {self.name} ignored SIGTERM for {timeout}s:\n{self.stderr()}")

    def dump_stacks(self) -> bool:
        """Ask the worker for every thread's stack (``faulthandler`` on SIGUSR1,
        into its stderr) and poll briefly for them; whether they came."""
        if self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + STACKS_WAIT
        while time.monotonic() < deadline and self.proc.poll() is None:
            if STACKS_MARK in self.stderr():
                return True
            time.sleep(0.05)
        return STACKS_MARK in self.stderr()

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def spawn_worker(
    url: str,
    name: str,
    log: Path,
    *options: str,
    script: Path = WORKER_SCRIPT,
    env: dict[str, str] | None = None,
) -> WorkerProc:
    """Start ``ops_worker.py URL NAME OPTIONS…`` (or ``script``) with ``$OPS_LOG`` =
    ``log`` and ``env`` added to the environment."""
    err = log.parent / f"{name}.err"
    environment = {**os.environ, "OPS_LOG": str(log), **(env or {})}
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(script), url, name, *options],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=environment,
        )
    return WorkerProc(name, proc, err)


def read_log(log: Path) -> list[tuple[str, str, int, str]]:
    """``(verb, key, position, worker)`` for every complete line of ``log``."""
    if not log.exists():
        return []
    events = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:
            events.append((parts[0], parts[1], int(parts[2]), parts[3]))
    return events


def logged(log: Path, verb: str, key: str, worker: str | None = None) -> bool:
    """Whether ``log`` has a ``verb`` line for ``key`` (by ``worker``, if given)."""
    return any(
        v == verb and k == key and (worker is None or w == worker) for v, k, _, w in read_log(log)
    )
