"""docs/http-api.md: every ```bash block runs, in order, against a live server,
and every endpoint of the API has a curl example there."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from http_server import serve

from querator.http.endpoints import ENDPOINTS

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "http-api.md"


def bash_blocks() -> list[str]:
    """The ```bash blocks of the page, in order."""
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)


@contextmanager
def worker(store: str, target: str) -> Iterator[None]:
    """``querator worker TARGET`` on ``store`` for the block (stopped by SIGTERM)."""
    command = [sys.executable, "-m", "querator.cli", "worker", target, "--url", store]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_every_endpoint_has_a_curl_example() -> None:
    shown = "\n".join(bash_blocks())
    missing = [e.path for e in ENDPOINTS if f"$QURL{e.path}" not in shown]
    assert missing == []
    for page in ("/health", "/metrics", "/openapi.json", "/docs"):
        assert f"$QURL{page}" in shown


def test_the_curl_examples_run_against_a_live_server(tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + "\n".join(bash_blocks())
    store = f"sqlite:///{tmp_path / 'docs.db'}"
    hello = str(ROOT / "examples" / "workflows_hello.py")
    with serve(store, "--app", hello) as url, worker(store, hello):
        done = subprocess.run(
            ["bash", "-c", script],
            env={**os.environ, "QURL": url},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert '"status":"pass"' in done.stdout
    assert re.search(r"454$", done.stdout, flags=re.M), "the empty long poll answers 454"
    assert '"result":{"text":"HELLO, CURL!","length":12}' in done.stdout
