"""The ``querator`` command: run workers, inspect runs and queues.

```
querator worker myapp.flows [--url URL] [--concurrency N]   # until SIGTERM/SIGINT
querator worker myapp.flows:FUNCTIONS                       # only the functions listed there
querator worker path/to/flows.py
querator start shop.checkout --app myapp.flows --args '["o-1"]' [--key o-1] [--wait]
querator runs list [--status failed] [--workflow shop.checkout] [--since 2h] [--limit 50]
querator runs list --after RUN_ID            # the next page (newest first)
querator runs reindex                        # index runs started before the run index existed
querator runs show RUN_ID
querator runs purge --before 30d [--status completed] [--workflow W]   # delete finished runs
querator runs cancel RUN_ID [--reason TEXT]
querator runs retry-compensation RUN_ID      # re-drive a compensation_failed saga
querator runs resume RUN_ID                  # a failed or cancelled run, from its failed step
querator runs fork RUN_ID --from-step N      # a new run keeping steps 0 … N-1
querator runs replay RUN_ID... --app myapp.flows   # check new code against stored runs
querator runs replay --running --app myapp.flows   # ... against every running run
querator queues list
querator queues stats NAME
querator queues delete NAME [--force]
querator locks list [--json]                 # semaphores and locks: limit, free, holders
querator dead list QUEUE [--limit N]         # dead letters of QUEUE (its dead_queue), with a count
querator dead show QUEUE ITEM_ID
querator dead requeue QUEUE [ITEM_ID...] [--all]   # back into QUEUE
querator dead purge QUEUE [ITEM_ID...] [--all]
querator schedules list | show NAME | pause NAME | resume NAME | trigger NAME | delete NAME
querator schedules create NAME WORKFLOW --app myapp.flows --cron '0 * * * *' [--args JSON]
querator scheduler [myapp.flows] [--interval 5]   # fire every schedule of the store, alone
querator health [--max-age SECONDS] [--require-sync-replication]  # probes: exit 1 when unhealthy
querator migrate [--dry-run]                 # bring the store's schema to this version
querator namespaces list | create NAME | delete NAME --force | move NAME --to-node H:P
querator webhooks list | show | add | disable | enable | rotate-secret | delete | send
querator webhooks attempts | failed | redrive | worker    # see docs/webhooks.md
querator serve [--host 127.0.0.1] [--port 2319] [--app myapp.flows]   # the HTTP API
querator tokens create | list | revoke       # bearer tokens of the HTTP API
```

The store is ``--url``, else ``$QUERATOR_URL``, else ``sqlite:///querator.db``;
its namespace ``--namespace``, else ``$QUERATOR_NAMESPACE``, else the URL's
``?namespace=``, else ``default``.
Errors of the ``querator.errors`` hierarchy are printed on stderr and end the
command with exit status 1 (2 for a bad argument).
"""

from __future__ import annotations

from querator.cli.app import AsJson as AsJson
from querator.cli.app import Url as Url
from querator.cli.app import _refuse_missing_file as _refuse_missing_file
from querator.cli.app import _reporting as _reporting
from querator.cli.app import _store as _store
from querator.cli.app import app
from querator.cli.app import dead_app as dead_app
from querator.cli.app import queues_app as queues_app
from querator.cli.app import runs_app as runs_app
from querator.cli.app import schedules_app as schedules_app
from querator.cli.loading import load_functions, load_served
from querator.cli.output import _json_list as _json_list
from querator.cli.output import _table as _table
from querator.cli.output import _when as _when

# The helpers above moved to querator.cli.app, .loading and .output; kept here
# for the branches merged after (their command modules import them from here).

__all__ = ["app", "load_functions", "load_served", "main"]


def main() -> None:
    """Entry point of the ``querator`` script."""
    app()


# The commands register themselves on the apps above when imported.
from querator.cli import events as events  # noqa: E402
from querator.cli import locks as locks  # noqa: E402
from querator.cli import migrate as migrate  # noqa: E402
from querator.cli import namespaces as namespaces  # noqa: E402
from querator.cli import queues as queues  # noqa: E402
from querator.cli import runs as runs  # noqa: E402
from querator.cli import scheduler as scheduler  # noqa: E402
from querator.cli import schedules as schedules  # noqa: E402
from querator.cli import serve as serve  # noqa: E402
from querator.cli import start as start  # noqa: E402
from querator.cli import streams as streams  # noqa: E402
from querator.cli import tasks as tasks  # noqa: E402
from querator.cli import webhooks as webhooks  # noqa: E402
from querator.cli import worker as worker  # noqa: E402
