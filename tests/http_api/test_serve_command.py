"""``querator serve`` as a command: a bind or store failure is one line on
stderr and a non-zero exit; SIGINT and SIGTERM stop it cleanly, exit 0."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from http_server import launch

from http_api.token_cli import cli, create
from querator import Querator


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    """``done`` failed with exactly one line on stderr holding ``words``, serving nothing."""
    assert done.returncode not in (0, None), done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0]
    assert "serving" not in done.stdout


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", "--url", "memory://", "--port", str(port))
    one_line_error(done, f"{port} is in use")


def test_an_address_that_cannot_be_bound_is_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with Querator(store):
        pass
    create(store, "ops", "admin")  # a public bind needs a token
    done = cli("serve", "--url", store, "--host", "192.0.2.1", "--port", "0")
    one_line_error(done, "cannot listen on 192.0.2.1")


def test_a_bad_store_url_is_one_line() -> None:
    done = cli("serve", "--url", "postgresql://nobody@127.0.0.1:1/none", "--port", "0")
    one_line_error(done, "PostgreSQL", "port 1")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_server_cleanly(sig: signal.Signals) -> None:
    proc, url = launch("memory://", "--log-level", "info")
    assert httpx.post(f"{url}/v1/queues.list", json={}, timeout=10).status_code == 200
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "ERROR" not in err, err
