"""Where one send -> ``recv`` goes (issue 30): each hop of the wake timestamped.

``python -m benchmarks.wake_trace [--samples N] [--before DIR]``

A worker process (:func:`serve_traced`: a real ``Worker`` serving
:func:`recv_trace`) writes the wall-clock instant of each hop to a file, and
this process is the sender. Per sample: a run waits in ``recv``; 50 ms later
this process sends and notes when ``send`` returned (the commit is done); the
worker notes the NOTIFY reaching its listener, the lease that took the wake,
the storing statement of what ``recv`` read (before and after) and the body
notes ``recv`` returning. Sender and worker are on one machine: one clock.

``--before DIR``: a second worker, on a database of its own, runs the querator
of ``DIR`` (a ``git archive`` copy of the tree before a change); samples
alternate between the two workers (the sender is this tree's in both).
Prints the median of each hop per worker; read them beside ``uptime``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from querator.workflows import recv, workflow

PARK_SECONDS = 3600.0
"""How long a run waits in ``recv`` at most (the sender sends long before)."""
PAUSE = 0.05
"""Seconds a run waits in ``recv`` before the send."""
HOPS = ("send returned", "notified", "leased", "read", "stored", "recv returned")
"""The instants of one sample, in order (``read``: the storing statement starts)."""
EVENTS_ENV = "QBENCH_WAKE_EVENTS"
"""The file the worker's hooks append their instants to."""


@workflow(name="qbench.recv_trace")
def recv_trace() -> float:
    """Wait for a message on ``ping``; the wall-clock instant ``recv`` returned."""
    recv("ping", timeout=PARK_SECONDS)
    return time.time()


def _note(out: Any, event: str) -> None:
    out.write(f"{event} {time.time():.6f}\n")
    out.flush()


def _hook(
    owner: Any,
    name: str,
    before: str | None,
    after: str | None,
    out: Any,
    when: Callable[..., bool] = lambda *args: True,
) -> None:
    """Wrap the coroutine function or function ``owner.name`` to note instants
    (``before`` only for calls whose arguments ``when`` accepts)."""
    original = getattr(owner, name, None)
    if original is None:
        return
    if inspect.iscoroutinefunction(original):

        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            if before:
                _note(out, before)
            result = await original(*args, **kwargs)
            if after and (after != "leased" or result[0].items):
                _note(out, after)
            return result

        setattr(owner, name, wrapped_async)
        return

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before and when(*args):
            _note(out, before)
        return original(*args, **kwargs)

    setattr(owner, name, wrapped)


def serve_traced(dsn: str) -> None:
    """The worker process: hooks on each hop, then a ``Worker`` serving :func:`recv_trace`."""
    from querator import Querator
    from querator.queue import background, long_poll
    from querator.workflows import Worker
    from querator.workflows.engine import driver
    from querator.workflows.keys import WORKFLOW_QUEUE

    out = open(os.environ[EVENTS_ENV], "a")  # noqa: SIM115 (open until the process ends)

    def workflows(tasks: Any, wakeup: str) -> bool:
        return wakeup == WORKFLOW_QUEUE

    _hook(background.ClientTasks, "_on_wake", "notified", None, out, workflows)
    _hook(long_poll.LongPoll, "lease", None, "leased", out)
    _hook(driver, "store_read", "read", "stored", out)
    with Querator(dsn) as q:
        Worker(q, [recv_trace]).run()


class _Traced:
    """One traced worker process on a database of its own."""

    def __init__(self, label: str, dsn: str, path: str | None, work: Path) -> None:
        self.label = label
        self.events = work / f"{label}.events"
        self.events.touch()
        env = dict(os.environ, **{EVENTS_ENV: str(self.events)})
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (path, root) if p)
        code = f"from benchmarks.wake_trace import serve_traced; serve_traced({dsn!r})"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / f"{label}.log", "wb"),  # noqa: SIM115
        )
        self.dsn = dsn
        self.read_at = 0
        self.samples: list[dict[str, float]] = []

    def new_events(self) -> list[tuple[str, float]]:
        with open(self.events) as f:
            f.seek(self.read_at)
            text = f.read()
            self.read_at = f.tell()
        return [(e, float(t)) for e, t in (line.split() for line in text.splitlines())]


def _sample(q: Any, traced: _Traced, pause: float) -> None:
    from querator.workflows import send
    from querator.workflows.keys import RESULTS_QUEUE, wait_key

    handle = q.start(recv_trace)
    deadline = time.monotonic() + 30
    while wait_key(handle.run_id, 0) not in q.lookup(RESULTS_QUEUE, [wait_key(handle.run_id, 0)]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{traced.label}: the run never reached recv")
        time.sleep(0.002)
    time.sleep(pause)
    traced.new_events()  # what the start and the park noted
    sent = time.time()
    send(q, handle.run_id, "ping", sent)
    returned = time.time()
    done = float(handle.result(timeout=30))
    marks = {"send returned": returned, "recv returned": done}
    for event, at in traced.new_events():
        if at >= sent and event not in marks:
            marks[event] = at  # the first of each after the send
    traced.samples.append({hop: marks[hop] - sent for hop in HOPS if hop in marks})


def _report(traced: _Traced) -> None:
    samples = traced.samples[2:]  # the first two warm up
    print(f"{traced.label}: {len(samples)} samples, medians in ms from the send's call")
    previous = "send called"
    for hop in HOPS:
        got = [s[hop] * 1000 for s in samples if hop in s]
        gaps = [
            (s[hop] - s.get(previous, 0.0)) * 1000 for s in samples if hop in s and previous in s
        ]
        if got:
            gap = f"  (+{statistics.median(gaps):7.2f} after {previous})" if gaps else ""
            print(f"  {hop:14} {statistics.median(got):7.2f}{gap}")
            previous = hop
    total = sorted(s["recv returned"] * 1000 for s in samples)
    print(f"  p90 total {total[int(len(total) * 0.9)]:.2f} ms")


def main(argv: list[str] | None = None) -> None:
    """Run the trace (see the module doc)."""
    from benchmarks.pg import throwaway_database
    from querator import Querator

    parser = argparse.ArgumentParser(prog="python -m benchmarks.wake_trace")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--before", help="a copy of the tree before the change")
    parser.add_argument("--pause", type=float, default=PAUSE, help="seconds parked before the send")
    args = parser.parse_args(argv)
    print(os.popen("uptime").read().strip())
    with tempfile.TemporaryDirectory(prefix="qbench-wake-") as work:
        labels = [("after", None)] + ([("before", args.before)] if args.before else [])
        workers: list[_Traced] = []
        clients: list[Any] = []
        stack: list[Callable[[], None]] = []
        try:
            for label, path in labels:
                db = throwaway_database(f"wake{label}")
                dsn = db.__enter__()
                stack.append(lambda db=db: db.__exit__(None, None, None))
                workers.append(_Traced(label, dsn, path, Path(work)))
                q = Querator(dsn)
                q.__enter__()
                stack.append(lambda q=q: q.__exit__(None, None, None))
                clients.append(q)
            _wait_serving(clients, workers)
            for _ in range(args.samples + 2):
                for q, traced in zip(clients, workers, strict=True):
                    _sample(q, traced, args.pause)
        finally:
            for traced in workers:
                traced.proc.terminate()
                traced.proc.wait(30)
            for undo in reversed(stack):
                undo()
    for traced in workers:
        _report(traced)
    print(os.popen("uptime").read().strip())


def _wait_serving(clients: list[Any], workers: list[_Traced]) -> None:
    from querator.workflows.keys import WORKFLOW_QUEUE

    for q, traced in zip(clients, workers, strict=True):
        deadline = time.monotonic() + 60
        while WORKFLOW_QUEUE not in {info.name for info in q.list_queues(limit=1000)}:
            if traced.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{traced.label}: the worker did not start")
            time.sleep(0.05)
    time.sleep(1.0)


if __name__ == "__main__":
    main()
