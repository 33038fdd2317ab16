"""``querator tokens …`` and ``querator serve`` run as real commands, for the token tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cli_forks import run_cli
from http_server import ROOT


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``querator ARGS`` (a forked process) and return it (output captured)."""
    return run_cli(
        *args, cwd=Path.cwd(), env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=timeout
    )


def create(store: str, name: str, scope: str) -> str:
    """A new token of ``scope`` in ``store``, made by the CLI."""
    done = cli("tokens", "create", name, "--scope", scope, "--url", store)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("qrt_")
    return token


def token_id(token: str) -> str:
    """The id part of ``qrt_ID_SECRET``."""
    return token.split("_")[1]
