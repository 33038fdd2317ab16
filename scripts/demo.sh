#!/usr/bin/env bash
# The demo on the embedded default (SQLite, no server): installs querator into
# .venv, then runs the trip-booking saga (examples/sagas/trip_booking.py):
# several trips, some of which fail and are compensated in reverse order.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e . 
exec .venv/bin/python examples/sagas/trip_booking.py "$@"
