"""``querator webhooks``, run as real subprocesses against a SQLite file."""

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
from webhooks.helpers import ROOT, check_signed
from webhooks.http_receiver import Receiver


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m querator.cli webhooks ARGS`` (a forked process)."""
    return run_cli("webhooks", *args, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_the_cli_manages_endpoints_sends_and_redrives(tmp_path: Path, receiver: Receiver) -> None:
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    refused = cli("add", "http://127.0.0.1:1/x", "--url", url)
    assert refused.returncode == 2 and "loopback" in refused.stderr
    added = cli(
        "add", receiver.url("ok"), "--event-type", "invoice.*", "--allow-private", "--url", url
    )
    assert added.returncode == 0, added.stderr
    endpoint = json.loads(added.stdout)
    assert endpoint["secret"].startswith("whsec_")
    gone = json.loads(cli("add", receiver.url("gone"), "--allow-private", "--url", url).stdout)
    listed = cli("list", "--url", url)
    assert endpoint["id"] in listed.stdout and "invoice.*" in listed.stdout
    assert "whsec_" not in cli("show", endpoint["id"], "--url", url).stdout
    sent = cli("send", "invoice.paid", '{"id": "in_1"}', "--idempotency-key", "in_1", "--url", url)
    assert sent.returncode == 0, sent.stderr
    message_id = sent.stdout.split()[0]

    err = tmp_path / "worker.err"
    with err.open("wb") as stderr:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "querator.cli",
                "webhooks",
                "worker",
                "--allow-private",
                "--url",
                url,
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        got = wait_for(lambda: receiver.at("ok"), timeout=20)
        assert check_signed(endpoint["secret"], got[0]) == {"id": "in_1"}
        with Querator(url) as q:  # polled through the library: a CLI call costs an interpreter
            wait_for(lambda: Webhooks(q).failed(endpoint_id=gone["id"]), timeout=20)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, err.read_text()
    assert gone["id"] in cli("failed", "--url", url).stdout
    log = cli("attempts", "--message", message_id, "--url", url)
    assert "delivered" in log.stdout and "dead" in log.stdout, log.stderr
    assert cli("enable", gone["id"], "--url", url).returncode == 0
    assert cli("redrive", "--endpoint", gone["id"], "--url", url).stdout.strip() == "re-driven: 1"
    assert cli("disable", endpoint["id"], "--reason", "paused", "--url", url).returncode == 0
    assert "disabled: paused" in cli("list", "--url", url).stdout
    secret = cli("rotate-secret", endpoint["id"], "--url", url).stdout.strip()
    with Querator(url) as q:
        assert Webhooks(q).get_endpoint(endpoint["id"]).secret == secret != endpoint["secret"]
    missing = cli("show", "ep_missing", "--url", url)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
