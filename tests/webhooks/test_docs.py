"""docs/webhooks.md's Python blocks and the example run as written."""

from __future__ import annotations

import re
from pathlib import Path

from webhooks.helpers import ROOT, run_python


def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "webhooks.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 6
    for index, block in enumerate(blocks):  # in order, in one directory: later ones read the store
        done = run_python(["-c", block], tmp_path)
        assert done.returncode == 0, f"block {index}:\n{block}\n{done.stderr}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["webhooks-demo.db"]


def test_the_example_sender_and_receiver(tmp_path: Path) -> None:
    done = run_python(
        [str(ROOT / "examples" / "webhooks" / "sender.py"), str(tmp_path / "hooks.db")], ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "sent 3 distinct messages" in done.stdout
    assert done.stdout.count("HTTP 204 delivered") == 2
    assert done.stdout.count("received msg_") == 2
