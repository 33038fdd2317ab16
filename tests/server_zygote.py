"""Forks ``querator serve`` processes for the tests, from one process that has
imported querator once (a test server then starts in milliseconds, not in a
fresh interpreter's second). Run as a script, not collected.

It reads JSON lines ``{"args": [...], "out": path}`` on stdin; for each it
forks a child that runs ``querator <args>`` with its stdout and stderr in
``path`` and ``path.err``, and answers ``{"pid": N}``. Children are reaped
automatically; the zygote ends when stdin closes.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import httpcore  # noqa: F401  (imported here so that every child finds them loaded)
import uvicorn.lifespan.on
import uvicorn.loops.auto
import uvicorn.protocols.http.auto
import uvicorn.protocols.websockets.auto  # noqa: F401
from typer.main import get_command

import querator.http.app
import querator.queue.backends.postgres.backend
import querator.queue.backends.sqlite.backend  # noqa: F401
from querator.cli import app

COMMAND = get_command(app)
"""The CLI's command tree, built once here (typer builds it on every call)."""


def child(args: list[str], out: str) -> None:
    """The forked process: ``querator ARGS`` with its output in files."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with open(out, "w") as stdout, open(out + ".err", "w") as stderr:
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
    code = 0
    try:
        COMMAND.main(args, prog_name="querator")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request["args"], request["out"])
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    main()
