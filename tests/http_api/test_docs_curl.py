"""docs/http-api.md: every ```bash block runs, in order, against a live server,
and every endpoint of the API has a curl example there."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from http_server import serve

from querator.http.endpoints import QUEUE_ENDPOINTS

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "http-api.md"


def bash_blocks() -> list[str]:
    """The ```bash blocks of the page, in order."""
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_endpoint_has_a_curl_example() -> None:
    shown = "\n".join(bash_blocks())
    missing = [e.path for e in QUEUE_ENDPOINTS if f"$QURL{e.path}" not in shown]
    assert missing == []
    for page in ("/health", "/metrics", "/openapi.json", "/docs"):
        assert f"$QURL{page}" in shown


def test_the_curl_examples_run_against_a_live_server(tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + "\n".join(bash_blocks())
    with serve(f"sqlite:///{tmp_path / 'docs.db'}") as url:
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
