"""The queue through database faults: nothing lost, nothing completed twice.

One producer and four consumers (OS processes, ``queue_proc.py``) work on a
queue of the throwaway cluster while the test restarts the server (fast or
immediate), terminates every backend, or makes the database read-only for
five seconds. Every produce and every complete is journaled after the call
returned. Then the producer stops, the consumers drain the queue, and the
journals are checked:

- lost: a produced item that nobody completed and that is no longer in the
  queue (items leave a queue only by completion here: no dead queue, no
  attempt limit, no expiry within the test). A complete that raised
  Unavailable has an unknown outcome; when the item is then gone, its
  completion is counted as ``unsure``, not lost.
- twice: an item whose ``complete`` returned twice (the versions forbid it).
- stuck: items still in the queue once the drain deadline passed.
- recover_s: seconds from the fault's end to the first second in which the
  consumers completed at least half as many items as per second before it;
- errors_after_s: seconds from the fault's end to the last call that failed
  Unavailable (0 when none failed after it).

Both must stay within :data:`~.harness.RECOVERY_BOUND`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from polling import wait_for

from querator import Querator, QueueSettings

from .cluster import Cluster
from .harness import (
    FAULTS,
    PRE_FAULT_SECONDS,
    RECOVERY_BOUND,
    errors_after,
    fmt,
    inject,
    poll,
    recovery,
    report,
)
from .load import Journals, spawn_queue_proc, stop_procs

pytestmark = pytest.mark.faults

CONSUMERS = 4
RATE = 100.0
"""Items produced per second."""
RECOVERY_DEADLINE = 45.0
"""Seconds after the fault within which the completion rate must come back."""
DRAIN_DEADLINE = 30.0
"""Seconds after the producer stopped within which every item must be completed."""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", FAULTS)
def test_queue_loses_nothing_through_a_fault(
    fault: str, cluster: Cluster, fault_url: str, tmp_path: Path
) -> None:
    queue = f"jobs-{fault}"
    with Querator(fault_url) as q:
        q.create_queue(queue, QueueSettings(lease_timeout=5.0, partitions=2))
    producer_log = tmp_path / "producer.log"
    logs = [producer_log, *(tmp_path / f"consumer-{n}.log" for n in range(CONSUMERS))]
    producer = spawn_queue_proc(
        tmp_path, "producer", "produce", fault_url, queue, str(logs[0]), str(RATE)
    )
    consumers = [
        spawn_queue_proc(tmp_path, f"consumer-{n}", "consume", fault_url, queue, str(log), f"c{n}")
        for n, log in enumerate(logs[1:])
    ]
    procs = [producer, *consumers]
    crashed: list[str] = []
    try:
        first = wait_for(
            lambda: Journals.read(logs).done_times[:1], timeout=60, message="a first completion"
        )[0]
        wait_for(  # a steady rate to compare with
            lambda: time.time() >= first + PRE_FAULT_SECONDS + 0.5,
            timeout=PRE_FAULT_SECONDS + 5,
            interval=0.1,
        )
        crashed = [str(p.args) for p in procs if p.poll() is not None]
        window = inject(cluster, fault)

        def recovered() -> float | None:
            seen = recovery(Journals.read(logs).done_times, window, until=time.time())[1]
            return None if seen is None else seen + 1e-9  # 0.0 s is a result too

        poll(recovered, timeout=RECOVERY_DEADLINE)
        producer_exits = stop_procs([producer])
        poll(lambda: not Journals.read(logs).unaccounted(), timeout=DRAIN_DEADLINE)
        crashed += [str(p.args) for p in consumers if p.poll() is not None]
        consumer_exits = stop_procs(consumers)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    journals = Journals.read(logs)
    # A fresh client: one opened before a fault may still hold broken sessions.
    with Querator(fault_url) as q:
        missing = journals.unaccounted()
        keys = [f"s{journals.produced[item_id]}" for item_id in missing]
        in_queue = {item.id for item in q.lookup(queue, keys).values()} if keys else set()
        left = q.stats(queue).total
    lost = sorted(missing - in_queue)
    twice = sorted(item_id for item_id, count in journals.done.items() if count > 1)
    rate, recover_s = recovery(journals.done_times, window, until=time.time())
    errors_s = errors_after(journals.unavailable_times, window)
    errors = {p.name: p.read_text()[-2000:] for p in tmp_path.glob("*.err") if p.read_text()}
    report(
        "queue",
        {
            "fault": fault,
            "produced": len(journals.produced),
            "lost": len(lost),
            "twice": len(twice),
            "stuck": left,
            "unsure": len(journals.unsure),
            "dup_seq": sum(1 for count in journals.done_seqs.values() if count > 1),
            "ghosts": len(set(journals.done) - set(journals.produced)),
            "unavailable": sum(journals.unavailable.values()),
            "pre_rate": f"{rate:.0f}/s",
            "fault_s": fmt(window.seconds),
            "recover_s": fmt(recover_s),
            "errors_after_s": fmt(errors_s),
            "exits": ",".join(str(code) for code in [*producer_exits, *consumer_exits]),
        },
    )
    assert not lost, f"{len(lost)} produced items were never completed: {lost[:10]}"
    assert not twice, f"{len(twice)} items were completed twice: {twice[:10]}"
    assert not crashed, f"processes died: {crashed}\n{errors}"
    assert recover_s is not None, (
        f"the completion rate did not come back to half of {rate:.0f}/s within "
        f"{RECOVERY_DEADLINE}s of the fault's end; unavailable: {dict(journals.unavailable)}\n"
        f"{errors}"
    )
    assert left == 0, f"{left} items still in the queue {DRAIN_DEADLINE}s after producing stopped"
    assert recover_s <= RECOVERY_BOUND, f"the rate came back {recover_s:.2f}s after the fault"
    assert errors_s <= RECOVERY_BOUND, f"calls failed until {errors_s:.2f}s after the fault"
