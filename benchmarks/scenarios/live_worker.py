"""The worker process of the ``step_loop`` and ``parked`` scenarios (issue 16).

One real :class:`~querator.workflows.Worker` with default options in a process of
its own (:func:`benchmarks.live_flows.serve`), as a user runs one; the harness
holds its own ``Querator`` to start runs and read records. Not a scenario.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from benchmarks.systems.base import Deadline
from querator import Querator
from querator.workflows.keys import RESULTS_QUEUE, WORKFLOW_QUEUE

ROOT = Path(__file__).resolve().parents[2]
"""The repository (the worker's working directory: ``benchmarks`` is importable there)."""
START_TIMEOUT = 60.0
"""Seconds the worker may take to import, connect and create its queues."""
SETTLE = 1.0
"""Seconds after its queues exist for the worker to reach its long polls."""
STOP_TIMEOUT = 60.0
"""Seconds the worker may take to stop after SIGTERM before it is killed."""


class WorkerProcess:
    """``serve(dsn, flow)`` in a subprocess, its output in ``log``; a context manager
    that stops it with SIGTERM (SIGKILL after :data:`STOP_TIMEOUT`) on exit."""

    def __init__(self, dsn: str, flow: str, log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"from benchmarks.live_flows import serve; serve({dsn!r}, {flow!r})",
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pid = self.proc.pid

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def check(self) -> None:
        """Raise (with the log's tail) if the worker has exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"the worker exited with {self.proc.returncode}; its log ends:\n{self.tail()}"
            )

    def wait_serving(self, q: Querator) -> None:
        """Block until the worker serves: it has created the results and workflow
        queues (the last thing it does before it starts leasing), plus :data:`SETTLE`."""
        deadline = Deadline(START_TIMEOUT)
        wanted = {RESULTS_QUEUE, WORKFLOW_QUEUE}
        while not wanted <= {info.name for info in q.list_queues(limit=1000)}:
            self.check()
            if deadline.passed():
                raise RuntimeError(f"the worker did not start within {START_TIMEOUT:.0f}s")
            time.sleep(0.05)
        time.sleep(SETTLE)
        self.check()

    def rss_kib(self) -> int:
        """The worker's resident set size now (``VmRSS`` of /proc/<pid>/status), KiB."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for process {self.pid}")

    def cpu_seconds(self) -> float:
        """CPU time the worker has used (user + system, all threads)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> tuple[int | None, float]:
        """SIGTERM, then wait: (exit status, seconds it took); status None when it had
        to be killed. A worker that had already exited: its status, 0 seconds."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            code = None
        return code, time.monotonic() - began

    def tail(self, lines: int = 30) -> str:
        """The last lines of the worker's output."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
