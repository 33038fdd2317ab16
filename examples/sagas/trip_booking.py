"""Book trips as sagas: flight, hotel, car; when the car fails, undo the rest.

Run it with no server at all:  python examples/sagas/trip_booking.py [path/to/db]
Without a path its SQLite file is in a temporary directory, removed at the end.

Each trip is a ``@saga``: three steps, each with a compensation. The car
rental service has no cars in Venice, so those trips fail at the car step and
their completed bookings are cancelled in reverse order: hotel, then flight.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import threading
from pathlib import Path

from pydantic import BaseModel

from querator import Querator
from querator.workflows import RetryPolicy, SagaFailed, Worker, saga, start, step

JOURNAL: dict[str, list[str]] = {}
"""What each trip's services did, in order (the services' side of the story)."""
_lock = threading.Lock()


def journal(trip_id: str, line: str) -> None:
    with _lock:
        JOURNAL.setdefault(trip_id, []).append(line)


class Trip(BaseModel):
    id: str
    traveller: str
    city: str


QUICK = RetryPolicy(max_attempts=2, initial=0.05, max_delay=0.1)


@step(name="trip.reserve_flight", retry=QUICK)
def reserve_flight(trip: Trip) -> str:
    journal(trip.id, f"book flight to {trip.city}")
    return f"FL-{trip.id}"


@reserve_flight.compensate(name="trip.cancel_flight")
def cancel_flight(trip: Trip, reservation: str) -> None:
    journal(trip.id, f"cancel flight {reservation}")


@step(name="trip.reserve_hotel", retry=QUICK)
def reserve_hotel(trip: Trip) -> str:
    journal(trip.id, f"book hotel in {trip.city}")
    return f"HT-{trip.id}"


@reserve_hotel.compensate(name="trip.cancel_hotel")
def cancel_hotel(trip: Trip, reservation: str) -> None:
    journal(trip.id, f"cancel hotel {reservation}")


@step(name="trip.rent_car", retry=QUICK)
def rent_car(trip: Trip) -> str:
    if trip.city == "Venice":
        journal(trip.id, "rent car: no cars in Venice")
        raise RuntimeError(f"no cars available in {trip.city}")
    journal(trip.id, f"rent car in {trip.city}")
    return f"CR-{trip.id}"


@rent_car.compensate(name="trip.return_car")
def return_car(trip: Trip, rental: str) -> None:
    journal(trip.id, f"return car {rental}")


@saga(name="trip.book")
def book_trip(trip: Trip) -> dict[str, str]:
    flight = reserve_flight(trip)
    hotel = reserve_hotel(trip)
    car = rent_car(trip)
    return {"flight": flight, "hotel": hotel, "car": car}


TRIPS = [
    Trip(id="t1", traveller="Ada", city="Lisbon"),
    Trip(id="t2", traveller="Brian", city="Venice"),
    Trip(id="t3", traveller="Chiara", city="Oslo"),
    Trip(id="t4", traveller="Dmitri", city="Venice"),
    Trip(id="t5", traveller="Eun-ji", city="Kyoto"),
]


def _label(compensation: str) -> str:
    """``trip.cancel_hotel@1`` -> ``cancel hotel``."""
    return compensation.split("@", maxsplit=1)[0].removeprefix("trip.").replace("_", " ")


def demo(path: Path) -> None:
    """Book the trips, print what each service did."""
    path.unlink(missing_ok=True)
    with Querator(f"sqlite:///{path}") as q:
        worker = Worker(q, [book_trip, reserve_flight, reserve_hotel, rent_car], concurrency=4)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            runs = [(trip, start(q, book_trip, trip, idempotency_key=trip.id)) for trip in TRIPS]
            booked = 0
            for trip, run in runs:
                try:
                    run.result(timeout=60)
                    booked += 1
                    summary = "booked"
                except SagaFailed as failed:
                    undone = ", ".join(_label(c) for c in failed.compensations)
                    summary = f"{failed.error_type}; undone: {undone}"
                print(f"{trip.id} {trip.traveller:<7} {trip.city:<7} {run.status():<12} {summary}")
                for line in JOURNAL[trip.id]:
                    print(f"      - {line}")
            print(
                f"{booked} of {len(TRIPS)} trips booked; "
                "the others were compensated in reverse order"
            )
        finally:
            worker.stop()
            thread.join()


def main() -> None:
    """Run the demo on ``argv[1]``, else on trips.db in a temporary directory (removed)."""
    # The car rental fails on purpose and the demo prints what happened itself;
    # querator logs each failure at WARNING with its traceback, which a real
    # worker keeps (`querator worker` logs at INFO). Here: errors only, one line each.
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.ERROR)
    logging.getLogger("querator.workflows").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="querator-") as tmp:
        demo(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "trips.db"))


if __name__ == "__main__":
    main()
