"""A real ``querator serve`` process on 127.0.0.1, on a free port, for tests."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
STARTUP = 30.0
"""Seconds a server may take to print its URL and answer /health."""


def _first_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=0.1):
                return proc.stdout.readline()
            if proc.poll() is not None:
                break
    return ""


def launch(
    dsn: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start ``querator serve --dsn DSN --port 0 ARGS…``; return the process and
    its base URL once /health answers (the caller stops it)."""
    command: Sequence[str] = [
        sys.executable, "-m", "querator.cli", "serve", "--dsn", dsn, "--port", "0",
        "--log-level", "warning", *args,
    ]  # fmt: skip
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ
    )
    deadline = time.monotonic() + STARTUP
    line = _first_line(proc, deadline)
    if "http://" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise RuntimeError(f"querator serve did not start: {line!r} {err[-2000:]}")
    url = line.strip().rsplit(" ", 1)[-1]
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"querator serve exited: {proc.stderr and proc.stderr.read()}")
        time.sleep(0.02)
    stop(proc)
    raise RuntimeError(f"querator serve did not answer /health within {STARTUP}s")


@contextmanager
def serve(dsn: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A ``querator serve`` process (see :func:`launch`) for the block; stopped
    with SIGTERM (SIGKILL after 10 s) at exit."""
    proc, url = launch(dsn, *args, env=env)
    try:
        yield url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
