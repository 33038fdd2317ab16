"""``python -m querator.cli ARGS`` as a real process, forked from a zygote
(tests/cli_zygote.py) that imported querator once: the same process a shell
starts (its own pid, stdin, stdout, stderr, environment, working directory and
exit status), without paying the interpreter's start-up and imports (1-2 s a
command on an idle machine, a test of a CLI runs dozens).

What is not exercised here, the console script's own start-up (``querator``
importing in a fresh interpreter), is covered by the tests that start worker
and server processes with ``python -m querator.cli``.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP = 120.0
"""Seconds the zygote may take to import querator (a loaded machine)."""


class _Zygote:
    """The zygote process of this test process, started on first use."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="qcli-"))
        self.count = 0
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "cli_zygote.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.buffer = b""
        if "ready" not in self.answer(time.monotonic() + STARTUP):
            raise RuntimeError("the CLI zygote did not start")

    def answer(self, deadline: float) -> dict[str, int]:
        """The zygote's next JSON line, or {} past ``deadline``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=min(left, 0.5)):
                    if left <= 0 or self.proc.poll() is not None:
                        return {}
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    return {}
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, int] = json.loads(line)
        return answer

    def run(
        self,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        stdin: str,
        timeout: float,
        script: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        with self.lock:
            self.count += 1
            out = self.scratch / f"cli-{self.count}.out"
            given = self.scratch / f"cli-{self.count}.in"
            given.write_text(stdin)
            request = {
                "args": list(args),
                "cwd": str(cwd),
                "env": dict(env),
                "path": [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p],
                "stdin": str(given),
                "out": str(out),
            }
            if script is not None:
                request["script"] = str(script)
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            pid = self.answer(time.monotonic() + STARTUP).get("pid")
            if pid is None:
                raise RuntimeError("the CLI zygote did not fork")
            ended = self.answer(time.monotonic() + timeout)
            timed_out = not ended
            if timed_out:
                os.killpg(pid, signal.SIGKILL)
                ended = self.answer(time.monotonic() + 30)
            stdout, stderr = out.read_text(), Path(f"{out}.err").read_text()
            for path in (out, Path(f"{out}.err"), given):
                path.unlink()
            program = [str(script)] if script else ["-m", "querator.cli"]
            command = [sys.executable, *program, *args]
            if timed_out:
                raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
            return subprocess.CompletedProcess(command, ended["code"], stdout, stderr)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for left in self.scratch.iterdir():
            left.unlink()
        self.scratch.rmdir()


_zygotes: dict[int, _Zygote] = {}


def _zygote() -> _Zygote:
    pid = os.getpid()  # a forked test process starts its own
    if pid not in _zygotes:
        _zygotes[pid] = made = _Zygote()
        atexit.register(made.close)
    return _zygotes[pid]


def run_cli(
    *args: str,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m querator.cli ARGS`` in ``cwd``, in the environment ``env``
    (default: this process's), ``stdin`` as its input; like
    ``subprocess.run(..., capture_output=True, text=True, check=False)``."""
    return _zygote().run(args, cwd, os.environ if env is None else env, stdin, timeout)


def run_script(
    script: Path,
    *args: str,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT ARGS`` in ``cwd``, forked from the zygote as :func:`run_cli` is
    (no input; like ``subprocess.run(..., capture_output=True, text=True, check=False)``)."""
    return _zygote().run(args, cwd, os.environ if env is None else env, "", timeout, script)
