"""Runs one submitted command detached from the process that submitted it.

    python launcher.py JOB_DIR COMMAND [ARG...]

Used by :class:`querator.spark.SparkSubmit` (run by path, so it imports only
the standard library). The launcher forks and returns at once; the child
starts a session of its own (a SIGKILL of the worker's process group does not
reach it), runs ``COMMAND`` in ``JOB_DIR`` with its output in
``JOB_DIR/output.log`` and writes ``JOB_DIR/exit.json`` when it ends. Before
returning, the launcher writes ``JOB_DIR/pid.json``: the child's pid and its
start time, so a later check is not fooled by a recycled pid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["EXIT_FILE", "LOG_FILE", "PID_FILE", "is_alive", "process_start", "write_json"]

PID_FILE = "pid.json"
EXIT_FILE = "exit.json"
LOG_FILE = "output.log"


def write_json(path: Path, data: dict[str, object]) -> None:
    """Write ``data`` to ``path`` whole (temporary file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def process_start(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks since boot)`` of a process (Linux
    ``/proc``); None when there is no such process or no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[19])


def is_alive(pid: int, start: int | None) -> bool:
    """True when process ``pid`` runs and (when known) started at ``start``."""
    if not Path("/proc").is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    found = process_start(pid)
    if found is None:
        return False
    state, started = found
    return state not in ("Z", "X") and (start is None or started == start)


def main(argv: list[str]) -> int:
    """Fork; the child runs the command, the parent records the child and returns."""
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    job_dir, command = Path(argv[1]), argv[2:]
    child = os.fork()
    if child:
        found = process_start(child)
        write_json(job_dir / PID_FILE, {"pid": child, "start": found[1] if found else None})
        return 0
    os.setsid()
    with open(job_dir / LOG_FILE, "ab") as log:
        # hold none of the submitter's pipes: it waits for the launcher only
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            code = subprocess.call(
                command, cwd=job_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        except OSError as exc:
            log.write(f"querator launcher: cannot run {command[0]!r}: {exc}\n".encode())
            code = 127
    write_json(job_dir / EXIT_FILE, {"code": code, "finished_at": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
