"""A real ``querator serve`` process on 127.0.0.1, on a free port, for tests."""

from __future__ import annotations

import json
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
    """Start ``querator serve --url DSN --port 0 ARGS…``; return the process and
    its base URL once /health answers (the caller stops it)."""
    command: Sequence[str] = [
        sys.executable, "-m", "querator.cli", "serve", "--url", dsn, "--port", "0",
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


class Forks:
    """``querator serve`` processes forked by one zygote (tests/server_zygote.py)
    that has imported querator once: a server per test costs milliseconds of
    start-up instead of a fresh interpreter's second."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._count = 0
        zygote = ROOT / "tests" / "server_zygote.py"
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        self._proc = subprocess.Popen(
            [sys.executable, str(zygote)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environ,
        )
        if '"ready"' not in _first_line(self._proc, time.monotonic() + STARTUP):
            self.close()
            raise RuntimeError("the server zygote did not start")

    def close(self) -> None:
        """End the zygote (its servers are stopped by their own tests)."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    @contextmanager
    def serve(self, dsn: str, *args: str) -> Iterator[str]:
        """Like :func:`serve`, in a forked process."""
        self._count += 1
        out = self._scratch / f"server-{self._count}.out"
        command = ["serve", "--url", dsn, "--port", "0", "--log-level", "warning", *args]
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"args": command, "out": str(out)}) + "\n")
        self._proc.stdin.flush()
        pid = int(json.loads(_first_line(self._proc, time.monotonic() + STARTUP))["pid"])
        try:
            yield self._wait_ready(pid, out)
        finally:
            _stop_pid(pid)

    @staticmethod
    def _wait_ready(pid: int, out: Path) -> str:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            text = out.read_text() if out.exists() else ""
            if "http://" in text:
                url = text.splitlines()[0].strip().rsplit(" ", 1)[-1]
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        return url
                except httpx.TransportError:
                    pass
            if not _alive(pid):
                err = Path(f"{out}.err")
                raise RuntimeError(f"forked server exited: {err.read_text()[-2000:]}")
            time.sleep(0.01)
        raise RuntimeError(f"forked server did not answer within {STARTUP}s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL if the process is still there after 10 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
