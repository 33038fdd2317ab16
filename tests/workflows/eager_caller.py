"""A caller process that starts one run eagerly (``start(..., eager=True)``).

Usage: python eager_caller.py URL NAME KEY N

Starts ``live.loop(KEY, N)`` with ``eager=True``: the caller runs its steps
itself (its steps log as ``NAME``), then prints the run id and exits. The
failover test SIGKILLs it midway. Logs (INFO) to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

# tests/ on sys.path, as pytest puts it: the flows are ``workflows.live_flows`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from workflows import live_flows


def main() -> None:
    url, name, key, n = sys.argv[1:5]
    os.environ["OPS_WORKER"] = name
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Querator(url) as q:
        run = q.start(live_flows.loop, key, int(n), eager=True)
        print(run.run_id, flush=True)


if __name__ == "__main__":
    main()
