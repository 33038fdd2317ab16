"""Graceful shutdown: SIGTERM or SIGINT answers open long polls at once (so
clients poll again, elsewhere or later), closes the store and exits."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from http_server import launch


@pytest.mark.parametrize(
    ("sig", "workers"), [(signal.SIGTERM, "1"), (signal.SIGINT, "1"), (signal.SIGTERM, "2")]
)
def test_a_signal_answers_open_long_polls_and_exits_cleanly(
    tmp_path: Path, sig: signal.Signals, workers: str
) -> None:
    proc, url = launch(f"sqlite:///{tmp_path / 'stop.db'}", "--workers", workers)
    try:
        created = httpx.post(f"{url}/v1/queues.create", json={"queue_name": "idle"}, timeout=10)
        assert created.status_code == 200
        answers: list[httpx.Response] = []
        body = {"queue_name": "idle", "client_id": "c", "batch_size": 1, "request_timeout": "10m"}

        def poll() -> None:
            answers.append(httpx.post(f"{url}/v1/queue.lease", json=body, timeout=60))

        polls = [threading.Thread(target=poll) for _ in range(3)]
        for thread in polls:
            thread.start()
        time.sleep(0.5)  # deliberate: the polls are waiting in the server
        started = time.monotonic()
        proc.send_signal(sig)
        for thread in polls:
            thread.join(timeout=30)
        # uvicorn re-raises the signal once it has shut down cleanly
        assert proc.wait(timeout=30) in (0, -sig, 128 + sig)
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
        assert time.monotonic() - started < 5, "the shutdown waited for the long polls"
        assert [(a.status_code, a.json()["message"]) for a in answers] == [
            (454, "service is shutting down")
        ] * 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
