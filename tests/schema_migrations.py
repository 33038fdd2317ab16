"""Helpers of the schema migration tests (tests/postgres/test_migrations.py and
tests/sqlite/test_migrations.py): the version 1 store they build, what they
check on it once migrated, and the processes and commands they run on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from cli_forks import run_cli
from polling import wait_for

from querator import Item, Querator, QueueSettings
from querator.queue.backends.postgres.migrations import MIGRATIONS as _PG_MIGRATIONS
from querator.queue.backends.schema_versions import newest
from querator.queue.routing import partition_for_key

ROOT = Path(__file__).resolve().parents[1]

DEAD_QUEUE = "orders-dead"
QUEUE = "orders"
"""The version 1 store's queues, made in this order (ids 1 and 2)."""
PARTITIONS = 2
"""Partitions of :data:`QUEUE`; :data:`DEAD_QUEUE` has one."""
MAX_ATTEMPTS = 3
QUEUES: list[tuple[str, str | None, int]] = [(DEAD_QUEUE, None, 1), (QUEUE, DEAD_QUEUE, PARTITIONS)]
"""(name, dead queue, partitions) of the store's queues, in the order they are made."""


class V1Item(NamedTuple):
    """An item put into the version 1 store."""

    partition: int
    payload: bytes
    dedup_key: str | None


def _item(payload: bytes, dedup_key: str | None, partition: int = 0) -> V1Item:
    """A keyed item goes to its key's partition, as produce routes it."""
    if dedup_key is not None:
        partition = partition_for_key(dedup_key, PARTITIONS)
    return V1Item(partition, payload, dedup_key)


ITEMS = [
    _item(b"b", "b"),
    _item(b"a", "a"),
    _item(b"upper B", "B"),
    _item(b"underscore", "_x"),
    _item(b"e acute", "\u00e9"),
    _item(b"a-1", "a-1"),
    _item(b"plain 1", None, 0),
    _item(b"plain 2", None, 1),
]
"""Keys whose code point order ("B" < "_x" < "a" < "a-1" < "b" < "é") differs
from a linguistic collation's."""

NEWEST = newest(_PG_MIGRATIONS).version
"""The newest schema version (one number names one schema on every backend)."""

MIGRATED = f"migrated from schema version 1 to {NEWEST}"
"""What the log says when opening migrates a version 1 store."""


def make_fresh_store(url: str) -> None:
    """A store made by the current code with the version 1 store's queues."""
    with Querator(url) as q:
        for name, dead, partitions in QUEUES:
            settings = QueueSettings(
                partitions=partitions, dead_queue=dead, max_attempts=MAX_ATTEMPTS
            )
            q.create_queue(name, settings)


def check_items_work(url: str) -> None:
    """The version 1 items, read, scanned, deduplicated, leased and completed."""
    with Querator(url) as q:
        keyed = sorted(item.dedup_key for item in ITEMS if item.dedup_key)
        assert [item.dedup_key for item in q.scan_keys(QUEUE, "")] == keyed
        assert [item.dedup_key for item in q.scan_keys(QUEUE, "a")] == ["a", "a-1"]
        found = q.lookup(QUEUE, ["\u00e9"])
        assert found["\u00e9"].payload == b"e acute"
        again = q.produce(QUEUE, [Item(payload=b"again", dedup_key="\u00e9")])
        assert again == [found["\u00e9"].id]  # the key is still held: nothing added
        urgent = q.produce(QUEUE, [Item(payload=b"urgent", priority=7, partition_key="u")])
        leased = q.lease(QUEUE, client_id="after-migration", batch_size=100)
        assert sorted(item.payload for item in leased) == sorted(
            [b"urgent", *(i.payload for i in ITEMS)]
        )
        partition = partition_for_key("u", PARTITIONS)
        first = next(item for item in leased if item.partition == partition)
        assert (first.id, first.priority) == (urgent[0], 7)  # before the older items there
        assert {item.priority for item in leased if item.id != urgent[0]} == {0}
        q.complete(QUEUE, leased)
        assert sum(p.total for p in q.stats(QUEUE).partitions) == 0
        assert q.produce(
            QUEUE, [Item(payload=b"new", dedup_key="b")]
        )  # the freed key is free again


_OPENER = """
import logging, sys
from querator import Querator
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
print("ready", flush=True)
with Querator(sys.argv[1]) as q:
    print("opened", sum(p.total for p in q.stats("orders").partitions), flush=True)
"""


class Opener(NamedTuple):
    """A process opening a store; its output goes to ``output``."""

    process: subprocess.Popen[bytes]
    output: Path


def start_openers(url: str, count: int, directory: Path) -> list[Opener]:
    """Start ``count`` processes that each open the store at ``url`` once."""
    openers = []
    for n in range(count):
        output = directory / f"opener-{n}.out"
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-c", _OPENER, url],
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=dict(os.environ),
            )
        openers.append(Opener(process, output))
    return openers


def wait_ready(openers: list[Opener]) -> None:
    """Until every opener has imported querator and is about to open the store."""
    wait_for(
        lambda: all(b"ready" in o.output.read_bytes() for o in openers),
        timeout=30,
        message="openers ready",
    )


def finish_openers(openers: list[Opener]) -> list[str]:
    """Wait for the openers to end (each must succeed); their outputs."""
    outputs = []
    for opener in openers:
        code = opener.process.wait(timeout=60)
        text = opener.output.read_text()
        assert code == 0, text
        assert f"opened {len(ITEMS)}" in text, text
        outputs.append(text)
    return outputs


def migrate_cli(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """Run ``querator migrate --url URL OPTIONS`` as a real command (a forked process)."""
    return run_cli("migrate", "--url", url, *options)
