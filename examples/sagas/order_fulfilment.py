"""Fulfil orders as sagas: reserve stock, charge payment, create the shipment.

Run it with no server at all:  python examples/sagas/order_fulfilment.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.

- Order o2's payment is declined: its stock reservation is released.
- While order o3's shipment is being created, the worker process is killed
  (SIGKILL). A new worker process takes over once the step's lease expires:
  the shipment is created (its service call is keyed by order, so the retry
  after the crash does not ship twice) and the order completes.

Workers here are separate processes (``--worker``) so that one can be killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from querator import Querator, QueueSettings
from querator.workflows import RetryPolicy, SagaFailed, Worker, saga, start, step

QUEUE = "shop.orders"


def journal_path() -> Path:
    """A text file beside the database, named in ``$ORDER_JOURNAL`` (set by main)."""
    return Path(os.environ.get("ORDER_JOURNAL", "orders-journal.txt"))


def journal(line: str) -> None:
    """What the services did, one line each (shared by every worker process)."""
    with journal_path().open("a") as f:
        f.write(line + "\n")


def journal_lines() -> list[str]:
    path = journal_path()
    return path.read_text().splitlines() if path.exists() else []


class Order(BaseModel):
    id: str
    item: str
    quantity: int
    cents: int


class PaymentDeclined(Exception):
    """The card was declined: retrying will not help."""


@step(name="shop.reserve_stock")
def reserve_stock(order: Order) -> str:
    journal(f"{order.id}: reserve {order.quantity} x {order.item}")
    return f"RSV-{order.id}"


@reserve_stock.compensate(name="shop.release_stock")
def release_stock(order: Order, reservation: str) -> None:
    journal(f"{order.id}: release {reservation}")


@step(name="shop.charge", retry=RetryPolicy(max_attempts=3, fail_on=(PaymentDeclined,)))
def charge_payment(order: Order) -> str:
    if order.cents > 50_000:
        journal(f"{order.id}: payment of {order.cents / 100:.2f} declined")
        raise PaymentDeclined(f"card declined for {order.cents / 100:.2f}")
    journal(f"{order.id}: charge {order.cents / 100:.2f}")
    return f"PAY-{order.id}"


@charge_payment.compensate(name="shop.refund")
def refund_payment(order: Order, payment: str) -> None:
    journal(f"{order.id}: refund {payment}")


@step(name="shop.ship", retry=RetryPolicy(max_attempts=5, initial=0.2))
def create_shipment(order: Order) -> str:
    if order.id == "o3" and not any("shipping o3" in line for line in journal_lines()):
        journal("shipping o3 (the worker is about to be killed)")
        time.sleep(60)  # killed meanwhile
    # The shipping service dedups on the order id: a re-run never ships twice.
    if not any(line == f"{order.id}: shipment SHP-{order.id}" for line in journal_lines()):
        journal(f"{order.id}: shipment SHP-{order.id}")
    return f"SHP-{order.id}"


@saga(name="shop.fulfil", queue=QUEUE)
def fulfil(order: Order) -> dict[str, str]:
    reservation = reserve_stock(order)
    payment = charge_payment(order)
    shipment = create_shipment(order)
    return {"reservation": reservation, "payment": payment, "shipment": shipment}


ORDERS = [
    Order(id="o1", item="kettle", quantity=1, cents=3_999),
    Order(id="o2", item="piano", quantity=1, cents=899_000),
    Order(id="o3", item="mugs", quantity=6, cents=2_400),
]


def serve(url: str) -> None:
    """``--worker``: serve the saga until SIGTERM."""
    with Querator(url) as q:
        Worker(q, [fulfil, reserve_stock, charge_payment, create_shipment]).run()


def spawn(url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--worker", url])


def wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the demo took too long")
        time.sleep(0.1)


def demo(path: Path) -> None:
    """Start the orders, kill a worker mid-shipment, print the outcome."""
    path = path.resolve()
    path.unlink(missing_ok=True)
    os.environ["ORDER_JOURNAL"] = str(path.with_suffix(".journal.txt"))
    journal_path().unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    with Querator(url) as q:
        q.create_queue(QUEUE, QueueSettings(lease_timeout=2.0, expire_timeout=86_400))
        runs = [start(q, fulfil, order, idempotency_key=order.id) for order in ORDERS]
        first = spawn(url)
        wait_until(lambda: any("shipping o3" in line for line in journal_lines()), 60)
        first.send_signal(signal.SIGKILL)
        first.wait()
        print("worker 1 killed (SIGKILL) while creating o3's shipment; starting worker 2")
        second = spawn(url)
        try:
            for order, run in zip(ORDERS, runs, strict=True):
                try:
                    result = run.result(timeout=60)
                    outcome = f"shipped {result['shipment']}"
                except SagaFailed as failed:
                    undone = ", ".join(c.split("@", maxsplit=1)[0] for c in failed.compensations)
                    outcome = f"{failed.message}; undone: {undone}"
                print(f"{order.id} {order.item:<7} {run.status():<12} {outcome}")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait()
    print("journal:")
    for line in journal_lines():
        print(f"  {line}")


def main() -> None:
    """Run the demo on ``argv[1]``, else on orders.db in a temporary directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "orders.db"))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        serve(sys.argv[2])
    else:
        main()
