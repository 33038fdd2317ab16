"""The examples the quick start lists run as written, leaving nothing behind.

(The README's and the docs' code blocks are run by tests/test_docs_blocks.py; the
saga examples by tests/examples/, the Spark pipeline by tests/spark/test_crash.py.)
"""

from __future__ import annotations

from pathlib import Path

from example_runs import EXAMPLES, run_example


def test_quickstart_demo_completes_every_order(tmp_path: Path) -> None:
    lines = run_example(EXAMPLES / "quickstart.py", tmp_path)
    assert "completed 60 of 60; left in queue: 0" in lines


def test_workflows_hello_prints_its_result(tmp_path: Path) -> None:
    [line] = run_example(EXAMPLES / "workflows_hello.py", tmp_path)
    assert line.endswith("{'text': 'HELLO, QUERATOR!', 'length': 16} completed")
