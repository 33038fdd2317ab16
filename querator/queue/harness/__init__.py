"""The worker harness: the lifecycle every long-running service shares.

A service (the workflow worker, the webhook delivery worker, the cron
scheduler; locks' renewer and the live feeds next) is written as hooks on
one lifecycle instead of hand-writing it each time:

- :mod:`~querator.queue.harness.stopping` -- :class:`StopRequest`: ``stop()``
  safe from any thread and signal handler; the first stops gracefully, the
  second hurries;
- :mod:`~querator.queue.harness.lease_worker` -- :class:`LeaseWorker`: start,
  lease with the shared outage backoff (:mod:`querator.queue.outage`), hand
  each item to a task within ``concurrency``, drain within ``shutdown_grace``,
  release what is left, within :data:`RELEASE_WITHIN` seconds;
- :mod:`~querator.queue.harness.renewal` -- :class:`Renewer`: one task keeps
  every lease in hand alive, the due ones renewed in one call per queue;
- :mod:`~querator.queue.harness.shell` -- :func:`run_sync`: the sync shell
  (``Worker.run()``): SIGTERM/SIGINT handlers in the main thread, once
  graceful and twice hurried, and a wait the handlers always interrupt.
"""

from querator.queue.harness.lease_worker import RELEASE_WITHIN, LeaseWorker
from querator.queue.harness.renewal import Kept, Renewer
from querator.queue.harness.shell import run_sync
from querator.queue.harness.stopping import StopRequest

__all__ = ["RELEASE_WITHIN", "Kept", "LeaseWorker", "Renewer", "StopRequest", "run_sync"]
