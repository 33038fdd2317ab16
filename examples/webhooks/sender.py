"""Send webhooks with querator and watch them arrive.

Run:  python examples/webhooks/sender.py path/to/hooks.db
It starts ``receiver.py`` on a free local port, adds it as an endpoint (local
targets need ``allow_private=True``: only for development), sends three
messages (one of them twice with the same idempotency key), runs a delivery
worker until every delivery is done, and prints the attempts log. The store
is the SQLite file given (deleted first); nothing else is written.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from querator import Querator
from querator.webhooks import DeliveryWorker, Webhooks, WebhookSettings, generate_secret

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main() -> None:
    """Send, deliver, report."""
    path = Path(sys.argv[1])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    secret, port = generate_secret(), free_port()
    receiver = subprocess.Popen(
        [sys.executable, str(HERE / "receiver.py"), str(port), secret],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert receiver.stdout is not None
    print(receiver.stdout.readline().strip())  # "listening on PORT": it is ready
    settings = WebhookSettings(allow_private=True, timeout=5.0)
    try:
        with Querator(f"sqlite:///{path}") as q:
            hooks = Webhooks(q, settings)
            endpoint = hooks.add_endpoint(
                f"http://127.0.0.1:{port}/webhooks", secret=secret, event_types=["invoice.*"]
            )
            sent = [
                hooks.send("invoice.created", {"id": "in_1"}, idempotency_key="in_1/created"),
                hooks.send("invoice.created", {"id": "in_1"}, idempotency_key="in_1/created"),
                hooks.send("invoice.paid", {"id": "in_1", "amount": 1999}),
                hooks.send("user.created", {"id": "u_1"}),  # filtered out: no endpoint wants it
            ]
            print(f"sent {len({m.id for m in sent})} distinct messages to {endpoint.id}")
            worker = DeliveryWorker(q, settings)
            thread = threading.Thread(target=worker.run)
            thread.start()
            deadline = time.monotonic() + 30
            while len(hooks.attempts(endpoint_id=endpoint.id)) < 2:
                if time.monotonic() > deadline:
                    raise SystemExit("deliveries did not finish within 30 s")
                time.sleep(0.05)
            worker.stop()
            thread.join()
            for attempt in reversed(hooks.attempts(endpoint_id=endpoint.id)):
                print(
                    f"attempt {attempt.message_id}: HTTP {attempt.status_code} "
                    f"{attempt.outcome.value}"
                )
    finally:
        receiver.terminate()
        output, _ = receiver.communicate(timeout=10)
    print(output.strip())


if __name__ == "__main__":
    main()
