"""Worker processes of the task tests and the lines their tasks log."""

from __future__ import annotations

from pathlib import Path

from workflows.ops_procs import WorkerProc, spawn_worker

SCRIPT = Path(__file__).with_name("tasks_worker.py")


def spawn(url: str, name: str, log: Path, *options: str, stall: float = 3600) -> WorkerProc:
    """A ``tasks_worker.py`` process logging to ``log`` (``stall``: seconds the
    stalling tasks sleep)."""
    env = {"TASKS_LOG": str(log), "STALL_SECONDS": str(stall)}
    return spawn_worker(url, name, log, *options, script=SCRIPT, env=env)


def lines(log: Path) -> list[tuple[str, str, str]]:
    """``(verb, key, worker)`` per complete line of ``log``."""
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            found.append((parts[0], parts[1], parts[2]))
    return found


def count(log: Path, verb: str, key: str | None = None) -> int:
    """Lines of ``log`` with ``verb`` (and ``key``)."""
    return sum(1 for v, k, _ in lines(log) if v == verb and (key is None or k == key))
