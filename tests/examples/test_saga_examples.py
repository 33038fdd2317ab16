"""The saga examples run as written (each in a subprocess, on a SQLite file), leaving
nothing behind."""

from __future__ import annotations

from pathlib import Path

from example_runs import EXAMPLES, run_example

SAGAS = EXAMPLES / "sagas"


def _run(name: str, tmp_path: Path) -> list[str]:
    return run_example(SAGAS / name, tmp_path)


def _block(lines: list[str], head: str) -> list[str]:
    """The indented lines under the line starting with ``head``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("      - "):
            break
        block.append(line.removeprefix("      - "))
    return block


def test_trip_booking_compensates_failed_trips_in_reverse(tmp_path: Path) -> None:
    lines = _run("trip_booking.py", tmp_path)
    assert "3 of 5 trips booked; the others were compensated in reverse order" in lines
    for trip in ("t2", "t4"):
        [head] = [line for line in lines if line.startswith(f"{trip} ")]
        assert "compensated" in head and "undone: cancel hotel, cancel flight" in head
        block = _block(lines, f"{trip} ")
        assert block[-2:] == [f"cancel hotel HT-{trip}", f"cancel flight FL-{trip}"]
        assert not any(line.startswith("return car") for line in block)
    for trip in ("t1", "t3", "t5"):
        [head] = [line for line in lines if line.startswith(f"{trip} ")]
        assert "completed" in head and "booked" in head
        assert not any("cancel" in line for line in _block(lines, f"{trip} "))


def test_order_fulfilment_survives_a_killed_worker(tmp_path: Path) -> None:
    lines = _run("order_fulfilment.py", tmp_path)
    text = "\n".join(lines)
    assert "worker 1 killed (SIGKILL)" in text
    [o1] = [line for line in lines if line.startswith("o1 ")]
    [o2] = [line for line in lines if line.startswith("o2 ")]
    [o3] = [line for line in lines if line.startswith("o3 ")]
    assert "completed" in o1 and "SHP-o1" in o1
    assert "compensated" in o2 and "PaymentDeclined" in o2 and "shop.release_stock" in o2
    assert "completed" in o3 and "SHP-o3" in o3
    assert lines.count("  o3: shipment SHP-o3") == 1  # shipped once despite the crash
    assert "  o2: release RSV-o2" in lines
    assert not any(line.startswith("  o2: refund") for line in lines)


def test_money_transfer_conserves_the_total(tmp_path: Path) -> None:
    lines = _run("money_transfer.py", tmp_path)
    assert lines[-1] == "total balance conserved"
    assert lines[0].endswith("total 15000") and lines[-2].endswith("total 15000")
    [x2] = [line for line in lines if line.startswith("x2 ")]
    assert "compensated" in x2 and "AccountFrozen" in x2 and "bank.refund" in x2
    [x3] = [line for line in lines if line.startswith("x3 ")]
    assert "completed" in x3 and "already debited (idempotent re-run)" in x3
    assert "'alice': 6800, 'bob': 8200, 'carol': 0" in lines[-2]


def test_payment_callback_completes_or_compensates_at_the_deadline(tmp_path: Path) -> None:
    lines = _run("payment_callback.py", tmp_path)
    [o1] = [line for line in lines if line.startswith("o1 ")]
    [o2] = [line for line in lines if line.startswith("o2 ")]
    [o3] = [line for line in lines if line.startswith("o3 ")]
    assert "completed" in o1 and "SHP-o1" in o1  # the callback POSTed to the server woke it
    assert "compensated" in o2 and "declined" in o2
    assert "compensated" in o3 and "no callback" in o3  # the deadline passed
    for order in ("o2", "o3"):
        assert "undone: shop.void_payment, shop.release" in (o2 if order == "o2" else o3)
        assert f"  {order}: release RSV-{order}" in lines
        assert f"  {order}: ship" not in lines
    assert "  o1: release RSV-o1" not in lines
