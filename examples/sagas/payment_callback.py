"""A checkout saga that waits for a payment provider's callback, with a deadline.

Run it with no server at all:  python examples/sagas/payment_callback.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.

The saga reserves stock, opens a payment at the provider and publishes the
payment page (``set_event``), then waits for the provider's callback
(``recv("payment", timeout=...)``). The run holds no worker while it waits: the
callback is an HTTP POST to ``querator serve`` (``/v1/runs.send``), whose commit
wakes the run. When the callback says the payment succeeded, the order ships;
when it says declined, or does not come before the deadline, the saga fails
and its compensations run in reverse: the payment is voided and the stock
released.

Order ``o1`` is paid, ``o2`` declined, and ``o3``'s customer never pays.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx

from querator import Querator
from querator.workflows import SagaFailed, Worker, get_event, recv, saga, set_event, start, step

DEADLINE = 2.0
"""Seconds the saga waits for the callback (an hour or a day in real life)."""
ORDERS = {"o1": "succeeded", "o2": "declined", "o3": None}
"""What the (simulated) provider reports for each order; None: no callback."""


class PaymentNotReceived(Exception):
    """The provider declined the payment, or its callback did not come in time."""


@step(name="shop.reserve")
def reserve(order: str) -> str:
    print(f"  {order}: reserve stock")
    return f"RSV-{order}"


@reserve.compensate(name="shop.release")
def release(order: str, reservation: str) -> None:
    print(f"  {order}: release {reservation}")


@step(name="shop.open_payment")
def open_payment(order: str) -> str:
    print(f"  {order}: open payment")
    return f"PAY-{order}"


@open_payment.compensate(name="shop.void_payment")
def void_payment(order: str, payment: str) -> None:
    print(f"  {order}: void {payment}")


@step(name="shop.ship")
def ship(order: str) -> str:
    print(f"  {order}: ship")
    return f"SHP-{order}"


@saga(name="shop.checkout")
def checkout(order: str) -> str:
    reserve(order)
    payment = open_payment(order)
    set_event("payment_page", f"https://pay.example/{payment}")
    callback = recv("payment", timeout=DEADLINE)  # no worker held while waiting
    if callback is None:
        raise PaymentNotReceived(f"no callback for {payment} within {DEADLINE}s")
    if callback.get("status") != "succeeded":
        raise PaymentNotReceived(f"{payment} {callback.get('status')}")
    return ship(order)


def provider(q: Querator, server: str, order: str, run_id: str) -> None:
    """The payment provider: the customer opens the page, the provider calls back."""
    page = get_event(q, run_id, "payment_page", timeout=30)
    outcome = ORDERS[order]
    if outcome is None:
        return  # the customer walked away: no callback
    body = {"run_id": run_id, "topic": "payment", "value": {"status": outcome, "page": page}}
    body["idempotency_key"] = f"callback-{order}"  # a provider retrying is harmless
    httpx.post(f"{server}/v1/runs.send", json=body, timeout=30).raise_for_status()


def serve(url: str) -> tuple[subprocess.Popen[str], str]:
    """``querator serve`` on the store, on a free port; its process and base URL."""
    command = [sys.executable, "-m", "querator.cli", "serve", "--url", url, "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server prints its URL once it listens
    return proc, line.strip().rsplit(" ", 1)[-1]


def demo(path: Path) -> None:
    """Check the three orders out, print how each ended."""
    path.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    with Querator(url) as q:
        functions: list[Any] = [checkout, reserve, open_payment, ship]
        worker = Worker(q, functions, concurrency=4)
        thread = threading.Thread(target=worker.run)
        thread.start()
        server, base = serve(url)
        try:
            runs = {order: start(q, checkout, order, idempotency_key=order) for order in ORDERS}
            callers = [
                threading.Thread(target=provider, args=(q, base, order, run.run_id))
                for order, run in runs.items()
            ]
            for caller in callers:
                caller.start()
            for caller in callers:
                caller.join()
            for order, run in runs.items():
                try:
                    outcome = run.result(timeout=60)
                except SagaFailed as failed:
                    undone = ", ".join(c.split("@", maxsplit=1)[0] for c in failed.compensations)
                    outcome = f"{failed.message}; undone: {undone}"
                print(f"{order} {run.status():<12} {outcome}")
        finally:
            server.terminate()
            server.wait(timeout=30)
            worker.stop()
            thread.join()


def main() -> None:
    """Run the demo on ``argv[1]``, else on shop.db in a temporary directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "shop.db"))


if __name__ == "__main__":
    main()
