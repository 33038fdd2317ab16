"""A checker of concurrent lease-queue histories against the sequential semantics.

Consumers record every call they make as an :class:`Op` (who, what, which item,
the version sent and the version received, when the call was invoked and when
it returned, on one monotonic clock, and how it ended). :func:`check_history`
then looks for behaviour no sequential execution of the queue could show. It is
pure: it takes the history and the queue's lease timeout and returns the
violations it found, as sentences (an empty list means none).

A call takes effect at one instant between its invocation and its return, and a
lease taken at instant ``t`` holds until at least ``t + lease_timeout`` on the
store's clock. The checker only reports what is certain under that rule: a
lease is surely live until ``invoke + lease_timeout`` of the lease (or renew)
that granted it, minus ``slack`` for clocks and rounding; a call that returned
before another was invoked surely took effect first.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

OK = "ok"
"""The outcome of a call that succeeded; failures carry a ConflictReason value."""
FAILED_LATE = frozenset({"stale", "not_leased", "missing"})
"""What a late call on an expired lease may end with."""
MUTATIONS = frozenset({"complete", "retry", "renew"})
"""Calls that need the item held under the version they name."""
GRANTS = frozenset({"lease", "renew"})
"""Successful calls that hand the caller a held version (``version_out``)."""


@dataclass(frozen=True, slots=True)
class Op:
    """One call on one item, as a consumer saw it."""

    thread: str
    kind: str
    """``produce``, ``lease``, ``complete``, ``retry`` or ``renew``."""
    item: str
    invoke: float
    ret: float
    outcome: str = OK
    version_in: int | None = None
    version_out: int | None = None
    attempts: int | None = None
    """Attempts reported by a lease."""
    late: bool = False
    """Sent by a consumer that "crashed": after its lease had surely run out."""

    @property
    def ok(self) -> bool:
        return self.outcome == OK

    def __str__(self) -> str:
        versions = f"v{self.version_in}->v{self.version_out}"
        late = " late" if self.late else ""
        return (
            f"{self.thread}:{self.kind}{late}({self.item} {versions}) -> {self.outcome}"
            f" [{self.invoke:.3f}, {self.ret:.3f}]"
        )


@dataclass
class Recorder:
    """Collects ops from many threads."""

    ops: list[Op] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


# -- the checks -------------------------------------------------------------------


def check_history(ops: Iterable[Op], lease_timeout: float, slack: float = 0.05) -> list[str]:
    """Every violation of the sequential semantics found in ``ops``."""
    by_item: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_item[op.item].append(op)
    problems: list[str] = []
    for item, item_ops in sorted(by_item.items()):
        item_ops.sort(key=lambda o: (o.invoke, o.ret))
        for check in (check_grant_versions, check_mutations, check_late, check_attempts):
            problems += [f"{item}: {p}" for p in check(item_ops)]
        for timed in (check_exclusive, check_failures_justified):
            problems += [f"{item}: {p}" for p in timed(item_ops, lease_timeout, slack)]
        problems += [f"{item}: {p}" for p in check_completed_once(item_ops)]
    return problems


def grants(ops: Sequence[Op]) -> list[Op]:
    """Successful leases and renews, by the version they returned."""
    found = [o for o in ops if o.kind in GRANTS and o.ok]
    return sorted(found, key=lambda o: o.version_out or 0)


def check_grant_versions(ops: Sequence[Op]) -> list[str]:
    """(a) Leased and renewed versions are distinct and grow in real-time order."""
    out = []
    given = grants(ops)
    for i, first in enumerate(given):
        for second in given[i + 1 :]:
            if first.version_out == second.version_out:
                out.append(f"version {first.version_out} granted twice: {first} and {second}")
    for first in given:
        for second in given:
            if first.ret < second.invoke and (first.version_out or 0) >= (second.version_out or 0):
                out.append(f"version did not grow in real-time order: {first} then {second}")
    return out


def chain(ops: Sequence[Op], lease: Op, before: float) -> tuple[list[Op], bool]:
    """The renews continuing ``lease`` invoked before ``before``, and whether a
    complete or retry of the chain was invoked before ``before`` (and succeeded)."""
    renews, versions = [], {lease.version_out}
    for op in ops:
        if op.kind == "renew" and op.ok and op.version_in in versions and op.invoke < before:
            renews.append(op)
            versions.add(op.version_out)
    released = any(
        o.kind in ("complete", "retry") and o.ok and o.version_in in versions and o.invoke < before
        for o in ops
    )
    return renews, released


def check_exclusive(ops: Sequence[Op], lease_timeout: float, slack: float) -> list[str]:
    """(b) No lease is granted while an earlier lease of the item surely still holds."""
    out = []
    leases = [o for o in grants(ops) if o.kind == "lease"]
    for i, later in enumerate(leases):
        for earlier in leases[:i]:
            renews, released = chain(ops, earlier, later.ret)
            live_until = max(o.invoke for o in [earlier, *renews]) + lease_timeout
            if not released and later.ret < live_until - slack:
                out.append(
                    f"leased while an earlier lease held until >= {live_until:.3f}: "
                    f"{earlier} then {later}"
                )
    return out


def check_mutations(ops: Sequence[Op]) -> list[str]:
    """(c) Every successful complete/retry/renew names the latest granted version,
    uses it once, and never follows a newer lease's return."""
    out = []
    given = grants(ops)
    done = [o for o in ops if o.kind in MUTATIONS and o.ok]
    for op in done:
        v = op.version_in or 0
        if not any(g.version_out == v and g.invoke < op.ret for g in given):
            out.append(f"succeeded on a version no lease or renew granted: {op}")
        newer = [g for g in given if (g.version_out or 0) > v and g.ret < op.invoke]
        if newer:
            out.append(f"succeeded on v{v} after {newer[0]} had returned: {op}")
        twice = [o for o in done if o is not op and o.version_in == v]
        if twice:
            out.append(f"version v{v} used by two successful calls: {op} and {twice[0]}")
    return out


def check_late(ops: Sequence[Op]) -> list[str]:
    """(d) A call on a lease that surely ran out fails; once the item was leased
    again (a newer version returned) it fails as stale or missing, not not_leased."""
    out = []
    given = grants(ops)
    for op in (o for o in ops if o.late):
        if op.outcome not in FAILED_LATE:
            out.append(f"late call on an expired lease ended {op.outcome!r}: {op}")
        relet = any(
            (g.version_out or 0) > (op.version_in or 0) and g.ret < op.invoke for g in given
        )
        if relet and op.outcome == "not_leased":
            out.append(f"late call after a re-lease reported not_leased, not stale: {op}")
    return out


def check_attempts(ops: Sequence[Op]) -> list[str]:
    """(f) The n-th successful lease of an item reports n attempts."""
    leases = [o for o in grants(ops) if o.kind == "lease"]
    return [
        f"lease #{n} reported {op.attempts} attempts: {op}"
        for n, op in enumerate(leases, start=1)
        if op.attempts != n
    ]


def check_failures_justified(ops: Sequence[Op], lease_timeout: float, slack: float) -> list[str]:
    """A holder whose lease surely still holds can complete, retry or renew it."""
    out = []
    given = grants(ops)
    for op in ops:
        if op.kind not in MUTATIONS or op.ok or op.late:
            continue
        granted = [g for g in given if g.version_out == op.version_in]
        used = any(
            o.kind in MUTATIONS and o.ok and o.version_in == op.version_in and o.invoke < op.ret
            for o in ops
        )
        if granted and not used and op.ret < granted[0].invoke + lease_timeout - slack:
            out.append(f"failed although its lease surely held: {op}")
    return out


def check_completed_once(ops: Sequence[Op]) -> list[str]:
    """(e) A produced item is completed exactly once, and nothing succeeds on it after."""
    produced = any(o.kind == "produce" and o.ok for o in ops)
    completes = [o for o in ops if o.kind == "complete" and o.ok]
    if not produced:
        return [f"operated on an item never produced: {ops[0]}"]
    if len(completes) != 1:
        return [f"completed {len(completes)} times, not once: {list(map(str, completes))}"]
    after = [o for o in ops if o.ok and o.kind != "produce" and o.invoke > completes[0].ret]
    return [f"succeeded after the item was completed: {o}" for o in after]
