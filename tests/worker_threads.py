"""A :class:`~querator.workflows.Worker` served by a background thread, for tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from querator.workflows import Worker


@contextmanager
def serving(worker: Worker, join_timeout: float = 30.0) -> Iterator[Worker]:
    """Run ``worker`` in a daemon thread for the block; stop it and check it stopped."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=join_timeout)
        assert not thread.is_alive(), "worker did not stop"
