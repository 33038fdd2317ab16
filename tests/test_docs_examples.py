"""The README's example and the quick start demo run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "q.produce" in b and "q.complete" in b)
    assert len(example.strip().splitlines()) <= 10
    done = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("working on") == 2


def test_quickstart_demo_completes_every_order(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "completed 60 of 60; left in queue: 0" in done.stdout
