"""A process that sends ``N`` messages to a run, printing each one's index once
its send returned: ``python sender.py URL RUN_ID N`` (killed by the test)."""

from __future__ import annotations

import sys

from querator import Querator
from querator.workflows import send


def main() -> None:
    url, run_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Querator(url) as q:
        for index in range(count):
            send(q, run_id, "t", index, idempotency_key=f"s{index}")
            print(index, flush=True)


if __name__ == "__main__":
    main()
