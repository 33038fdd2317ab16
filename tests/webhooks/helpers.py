"""Small helpers of the webhook tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sized
from pathlib import Path
from typing import TypeVar

from polling import wait_for
from standardwebhooks import Webhook

from querator.webhooks import WebhookSettings
from webhooks.http_receiver import Received

T = TypeVar("T", bound=Sized)
ROOT = Path(__file__).resolve().parents[2]
"""The repository."""

FAST = WebhookSettings(
    schedule=(0.0, 0.1, 0.1),
    jitter=0.0,
    timeout=3.0,
    connect_timeout=1.0,
    allow_private=True,
    lease_timeout=1.5,
)
"""Three attempts 0.1 s apart; local targets allowed (the receiver is on 127.0.0.1);
leases of 1.5 s (renewed every 0.5 s while an attempt runs)."""


def until_len(fetch: Callable[[], T], count: int, timeout: float = 10.0) -> T:
    """``fetch()`` once it holds ``count`` entries (fails the test after ``timeout``)."""
    box: list[T] = []

    def ready() -> bool:
        box[:] = [fetch()]
        return len(box[0]) == count

    wait_for(ready, timeout=timeout, message=f"{count} entries")
    return box[0]


def check_signed(secret: str, got: Received) -> object:
    """The payload, once the independent ``standardwebhooks`` package has
    verified the request's signature (it raises otherwise)."""
    return Webhook(secret).verify(got.body, got.headers)


def run_python(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` with this checkout importable; output captured."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
