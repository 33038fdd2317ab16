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

import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
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

pytestmark = pytest.mark.faults

PROC = Path(__file__).with_name("queue_proc.py")
CONSUMERS = 4
RATE = 100.0
"""Items produced per second."""
RECOVERY_DEADLINE = 45.0
"""Seconds after the fault within which the completion rate must come back."""
DRAIN_DEADLINE = 30.0
"""Seconds after the producer stopped within which every item must be completed."""
STOP_TIMEOUT = 30.0


@dataclass
class Journals:
    """What the producer and the consumers journaled so far."""

    produced: dict[str, int] = field(default_factory=dict)
    """Item id -> sequence number."""
    done: Counter[str] = field(default_factory=Counter)
    done_seqs: Counter[int] = field(default_factory=Counter)
    done_times: list[float] = field(default_factory=list)
    unsure: set[str] = field(default_factory=set)
    unavailable: Counter[str] = field(default_factory=Counter)
    unavailable_times: list[float] = field(default_factory=list)
    conflicts: int = 0

    @classmethod
    def read(cls, paths: list[Path]) -> Journals:
        journals = cls()
        for path in paths:
            if path.exists():
                for line in path.read_text().splitlines():
                    journals._add(line.split())
        journals.done_times.sort()
        return journals

    def _add(self, parts: list[str]) -> None:
        match parts:
            case ["produced", seq, item_id, _]:
                self.produced[item_id] = int(seq)
            case ["done", item_id, seq, stamp]:
                self.done[item_id] += 1
                self.done_seqs[int(seq)] += 1
                self.done_times.append(float(stamp))
            case ["unsure" | "abandoned", item_id, *_]:
                self.unsure.add(item_id)
            case ["conflict", *_]:
                self.conflicts += 1
            case ["unavailable", op, stamp]:
                self.unavailable[op] += 1
                self.unavailable_times.append(float(stamp))
            case _:
                pass  # a line being written, or "stopped"

    def unaccounted(self) -> set[str]:
        """Produced items with no completion (sure or unsure) journaled."""
        return set(self.produced) - set(self.done) - self.unsure


def _spawn(tmp_path: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(PROC), *args], stdout=subprocess.DEVNULL, stderr=err
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> list[int | None]:
    """SIGTERM all, then reap each: its exit code, or None if it had to be killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    codes: list[int | None] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append(None)
    return codes


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
    producer = _spawn(tmp_path, "producer", "produce", fault_url, queue, str(logs[0]), str(RATE))
    consumers = [
        _spawn(tmp_path, f"consumer-{n}", "consume", fault_url, queue, str(log), f"c{n}")
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
        producer_exits = _stop([producer])
        poll(lambda: not Journals.read(logs).unaccounted(), timeout=DRAIN_DEADLINE)
        crashed += [str(p.args) for p in consumers if p.poll() is not None]
        consumer_exits = _stop(consumers)
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
