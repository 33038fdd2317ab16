"""A durable three-step workflow on SQLite: start it, serve it, print its result.

Run it with no server at all:  python examples/workflows_hello.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

from querator import Querator
from querator.workflows import (
    RetryPolicy,
    Worker,
    close_stream,
    recv,
    set_event,
    start,
    step,
    workflow,
    write_stream,
)


@step(name="hello.greet")
def greet(name: str) -> str:
    return f"Hello, {name}"


@step(name="hello.shout", retry=RetryPolicy(max_attempts=5, initial=0.1))
def shout(text: str) -> str:
    return text.upper() + "!"


@step(name="hello.count")
def count(text: str) -> int:
    return len(text)


@workflow(name="hello.flow")
def hello(name: str) -> dict[str, object]:
    text = shout(greet(name))  # each step call is a leased item of its own
    return {"text": text, "length": count(text)}


@workflow(name="hello.approval")
def approval(name: str) -> object:
    """Talking to a run (the HTTP API's examples): publish a status, log to a
    stream, wait up to an hour for an ``approve`` message."""
    set_event("status", {"waiting_for": name})
    write_stream("log", f"asked {name}")
    answer = recv("approve", timeout=3600)
    write_stream("log", answer)
    close_stream("log")
    return answer


def demo(path: Path) -> None:
    """Start the workflow, serve it, print its result."""
    path.unlink(missing_ok=True)
    with Querator(f"sqlite:///{path}") as q:
        worker = Worker(q, [hello, greet, shout, count], concurrency=4)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            run = start(q, hello, "querator", idempotency_key="hello-1")
            print(run.run_id, run.result(timeout=30), run.status())
        finally:
            worker.stop()
            thread.join()


def main() -> None:
    """Run the demo on ``argv[1]``, else on hello.db in a temporary directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "hello.db"))


if __name__ == "__main__":
    main()
