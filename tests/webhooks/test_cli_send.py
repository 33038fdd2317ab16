"""``querator webhooks send`` takes large payloads from a file or stdin and an
ordering key; ``querator webhooks worker`` logs like ``querator worker``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cli_forks import run_cli
from polling import wait_for

from querator import Querator
from querator.webhooks import Webhooks
from webhooks.helpers import ROOT, run_python


def send(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``querator webhooks send ARGS`` (``stdin`` piped in; a forked process)."""
    return run_cli(
        "webhooks", "send", *args, stdin=stdin or "", timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_send_reads_a_large_payload_from_a_file_or_stdin(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    with Querator(url) as q:
        Webhooks(q).list_endpoints()  # the store exists
        big = {"blob": "x" * 200_000}  # over one argument's limit (128 KiB), under the cap
        path = tmp_path / "big.json"
        path.write_text(json.dumps(big))
        sent = [
            send("blob.made", "--payload-file", str(path), "--url", url),
            send("blob.made", f"@{path}", "--ordering-key", "acct-1", "--url", url),
            send("blob.made", "-", "--url", url, stdin=json.dumps(big)),
            send("blob.made", "--payload-file", "-", "--url", url, stdin='{"small": 1}'),
        ]
        assert [done.returncode for done in sent] == [0, 0, 0, 0], [d.stderr for d in sent]
        messages = [Webhooks(q).get_message(done.stdout.split()[0]) for done in sent]
    assert [json.loads(m.payload) for m in messages] == [big, big, big, {"small": 1}]
    assert [m.ordering_key for m in messages] == [None, "acct-1", None, None]


def test_send_refuses_a_missing_or_doubled_payload_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    with Querator(url) as q:
        Webhooks(q).list_endpoints()
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"blob": "x" * 300_000}))
    cases = [
        (["e.t"], "give it as JSON"),
        (["e.t", "{}", "--payload-file", str(huge)], "give it as JSON"),
        (["e.t", f"@{tmp_path / 'nope.json'}"], "cannot read"),
        (["e.t", "--payload-file", str(huge)], "over the cap"),
        (["e.t", "{nope"], "is not JSON"),
    ]
    for args, said in cases:
        done = send(*args, "--url", url)
        assert done.returncode == 2, (args, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: invalid payload") and said in line, line


def test_the_webhooks_worker_logs_json_lines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    bad = run_python(["-m", "querator.cli", "webhooks", "worker", "--log-format", "xml"])
    assert bad.returncode == 2 and "--log-format" in bad.stderr
    err = tmp_path / "worker.err"
    command = ["webhooks", "worker", "--log-format", "json", "--url", url]
    with err.open("wb") as stderr:
        worker = subprocess.Popen(
            [sys.executable, "-m", "querator.cli", *command],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        wait_for(lambda: "delivering" in err.read_text(), timeout=30, message="worker started")
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, err.read_text()
    lines = [json.loads(line) for line in err.read_text().splitlines() if line.strip()]
    assert any("delivering" in str(line.get("msg")) for line in lines), lines
