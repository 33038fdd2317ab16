"""Running an example script as a user would: no arguments, in an empty directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_example(
    script: Path, tmp_path: Path, *, timeout: float = 120.0, keeps_temp: bool = False
) -> list[str]:
    """Run ``script`` without arguments in an empty directory; its stdout lines.

    Fails unless it exits 0 and leaves that directory empty. Its temporary files
    go to a directory of the test's own (``TMPDIR``), which must be empty again
    afterwards unless ``keeps_temp`` (an example that keeps its output there).
    """
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # A short TMPDIR: SQLite's wake sockets live under it when a database path is long.
    temp = Path(tempfile.mkdtemp(prefix="qx-"))
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=cwd,
            env={**os.environ, "TMPDIR": str(temp)},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert not list(cwd.iterdir()), f"{script.name} wrote into its working directory"
        left = list(temp.iterdir())
        assert keeps_temp or not left, f"{script.name} left temporary files behind: {left}"
    finally:
        shutil.rmtree(temp)
    return done.stdout.splitlines()
