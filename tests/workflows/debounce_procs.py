"""A caller process for the debounce tests: ``python -m tests.workflows.debounce_procs
URL NAME CALLS`` makes CALLS debounced starts and prints each run id it got."""

from __future__ import annotations

import sys

from querator import Querator
from querator.workflows import Debounce, start

from .flows import Order, checkout


def main(url: str, name: str, calls: int) -> None:
    bounce = Debounce(key="procs", delay=5.0)
    with Querator(url) as q:
        ids = {start(q, checkout, Order(id=f"{name}-{i}", cents=i), debounce=bounce).run_id
               for i in range(calls)}  # fmt: skip
    print(" ".join(sorted(ids)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
