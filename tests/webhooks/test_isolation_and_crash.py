"""A hanging endpoint never delays the others; a worker killed mid-attempt
loses nothing (the delivery is retried, with the same webhook-id)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator
from querator.webhooks import DeliveryWorker, Outcome, Webhooks, WebhookSettings
from webhooks.helpers import check_signed, until_len
from webhooks.http_receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
PATIENT = WebhookSettings(schedule=(0.0, 0.1), jitter=0.0, timeout=20.0, allow_private=True)
"""Attempts may last 20 s: a hanging endpoint holds its slots that long."""


def test_a_hanging_endpoint_does_not_delay_the_others(q: Querator, receiver: Receiver) -> None:
    hooks = Webhooks(q, PATIENT)
    hanging = hooks.add_endpoint(receiver.url("hang"), max_in_flight=2)
    healthy = [hooks.add_endpoint(receiver.url("ok")) for _ in range(3)]
    worker = DeliveryWorker(q, PATIENT, concurrency=16, shutdown_grace=0.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        for n in range(30):
            hooks.send("a.b", {"n": n})
        got = until_len(lambda: receiver.at("ok"), 90, timeout=15)
        assert receiver.hanging == 2  # the hanging endpoint holds its two slots, no more
        assert hooks.attempts(endpoint_id=hanging.id) == []  # none of its attempts ended yet
        wait_for(lambda: worker.worker.counts["delivered"] == 90, timeout=5)
        # items waiting for it give up within LOCAL_WAIT: they are given back, not held
        wait_for(lambda: worker.worker.counts["deferred"] >= 28, timeout=5)
        wait_for(lambda: worker.worker.gates[hanging.id].waiting == 0, timeout=5)
        assert receiver.hanging == 2
        for endpoint in healthy:
            mine = [r for r in got if _signed(endpoint.secret, r)]
            assert len(mine) == 30
    finally:
        worker.stop()
        thread.join(timeout=20)
    assert not thread.is_alive()


def _signed(secret: str, request: object) -> bool:
    try:
        check_signed(secret, request)  # type: ignore[arg-type]
    except Exception:
        return False
    return True


@contextmanager
def worker_process(url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("worker_proc.py")), url],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"], indirect=True)
def test_a_worker_killed_mid_attempt_loses_nothing(
    backend_url: str, hooks: Webhooks, receiver: Receiver, tmp_path: Path
) -> None:
    endpoint = hooks.add_endpoint(receiver.url("held"))
    message = hooks.send("a.b", {"n": 1})
    with worker_process(backend_url, tmp_path / "first.log") as first:
        wait_for(lambda: receiver.hanging == 1, timeout=20, message="the attempt is in flight")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    receiver.release()  # the killed worker's request ends now: the receiver got it once
    with worker_process(backend_url, tmp_path / "second.log"):
        log = until_len(lambda: hooks.attempts(message_id=message.id), 1, timeout=30)
    assert log[0].outcome is Outcome.DELIVERED
    got = receiver.at("held")
    assert len(got) == 2  # the killed attempt and its retry: one duplicate for one kill
    assert {r.headers["webhook-id"] for r in got} == {message.id}
    assert all(check_signed(endpoint.secret, r) == {"n": 1} for r in got)
