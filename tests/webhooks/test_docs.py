"""docs/webhooks.md's Python blocks and the example run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "webhooks.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 6
    for index, block in enumerate(blocks):  # in order, in one directory: later ones read the store
        done = run(["-c", block], tmp_path)
        assert done.returncode == 0, f"block {index}:\n{block}\n{done.stderr}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["webhooks-demo.db"]


def test_the_example_sender_and_receiver(tmp_path: Path) -> None:
    done = run(
        [str(ROOT / "examples" / "webhooks" / "sender.py"), str(tmp_path / "hooks.db")], ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "sent 3 distinct messages" in done.stdout
    assert done.stdout.count("HTTP 204 delivered") == 2
    assert done.stdout.count("received msg_") == 2
