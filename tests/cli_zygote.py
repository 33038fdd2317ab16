"""Forks ``python -m querator.cli`` processes for the tests, from one process that
has imported querator once (a command then costs a fork, not a fresh
interpreter's 1-2 s of imports). Run as a script, not collected; the client is
tests/cli_forks.py.

It reads JSON lines ``{"args", "cwd", "env", "path", "stdin", "out"}`` on stdin.
For each it forks a child that becomes ``python -m querator.cli ARGS`` run in
``cwd`` with the environment ``env`` and ``sys.path`` ``[cwd, *path, <site>]``,
stdin from the file ``stdin``, stdout and stderr in ``out`` and ``out.err``; it
answers ``{"pid": N}`` at once and ``{"code": C}`` (the exit status as
``subprocess`` reports it) when the child has ended. One command at a time; the
zygote ends when stdin closes. A request with ``"script": path`` becomes
``python SCRIPT ARGS`` instead (the docs' blocks run so).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import runpy
import sys
import threading
import traceback
from typing import Any, NoReturn

from typer.main import get_command

import querator.queue.backends.postgres.backend
import querator.queue.backends.sqlite.backend  # noqa: F401  (loaded once, for every child)
from querator import cli

COMMAND = get_command(cli.app)
"""The CLI's command tree, built once here (typer builds it on every call)."""

BASE_PATH = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
"""The interpreter's own ``sys.path`` (site-packages …), without this script's
directory and the zygote's ``PYTHONPATH``: a child puts its own in front."""


def child(request: dict[str, Any]) -> NoReturn:
    """The forked process: set up as a fresh ``python -m querator.cli`` would be, then
    run the command and end as a script does (exit status, non-daemon threads
    joined, atexit handlers run, output flushed)."""
    os.setsid()  # its own process group: a timed-out command is killed whole
    cwd = str(request["cwd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = [cwd, *request["path"], *BASE_PATH]
    out = str(request["out"])
    with open(str(request["stdin"]), "rb") as stdin, open(out, "wb") as stdout:
        os.dup2(stdin.fileno(), 0)
        os.dup2(stdout.fileno(), 1)
    with open(out + ".err", "wb") as stderr:
        os.dup2(stderr.fileno(), 2)
    script = request.get("script")
    if script is None:
        sys.argv = [str(cli.__file__).replace("__init__.py", "__main__.py"), *request["args"]]
    else:
        sys.argv = [str(script), *request["args"]]
    code = 0
    try:
        if script is None:
            COMMAND(prog_name="python -m querator.cli")
        else:
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:  # as the interpreter reports it
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    # What an interpreter does at exit, but the teardown of every module: with
    # the zygote's heap shared copy-on-write, that costs more than the command.
    threading._shutdown()  # type: ignore[attr-defined]  # joins non-daemon threads
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    gc.freeze()  # the imported modules stay out of the children's collections
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)  # never returns
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
