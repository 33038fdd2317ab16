"""Model-based test: the real queue against a small sequential model of it.

Hypothesis drives random sequences of produce, lease, complete, retry, renew
and transact calls — with current versions and with stale, never-leased and
missing ones — and after every step compares the queue (stats, list_items,
the dead queue) with :class:`Model`, a few lines of pure Python that spell out
the documented semantics. Leases never expire here (one-hour lease timeout),
so the model needs no clock: a logical tick per call orders items the way
``(available_at, seq)`` does.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from querator import Item, Leased, Querator, QueueSettings, Ref, TransactResult
from querator.errors import Conflict, ConflictReason, RequestTimeout

from .helpers import utcnow

LEASE_TIMEOUT = 3600.0
MAX_ATTEMPTS = 3
CLIENT = "model-client"
READY, SCHEDULED, LEASED = "ready", "scheduled", "leased"
CHANGES = ["complete", "retry", "retry-later", "retry-dead", "renew"]
DEDUP_KEYS = st.sampled_from([None, None, None, "k0", "k1", "k2"])
MISSING, STALE, NOT_LEASED = ConflictReason.MISSING, ConflictReason.STALE, ConflictReason.NOT_LEASED


@dataclass(frozen=True)
class Spec:
    """One item to produce, as the test chose it."""

    payload: bytes
    dedup_key: str | None
    scheduled: bool

    def item(self) -> Item:
        at = utcnow() + timedelta(days=1) if self.scheduled else None
        return Item(payload=self.payload, dedup_key=self.dedup_key, enqueue_at=at)


@dataclass
class Entry:
    """The model of one item in the main queue."""

    id: str
    seq: int
    payload: bytes
    dedup_key: str | None
    state: str
    ready_at: int
    version: int = 1
    attempts: int = 0


class Model:
    """The sequential semantics of one single-partition queue and its dead queue."""

    def __init__(self) -> None:
        self.items: dict[str, Entry] = {}  # in produce (= id) order
        self.gone: dict[str, int] = {}  # completed or dead-lettered id -> last version
        self.dead: list[tuple[str, bytes]] = []  # (source_id, payload)
        self.side = 0
        self.tick = 0
        self.seqs = 0

    def in_state(self, state: str) -> list[Entry]:
        return [e for e in self.items.values() if e.state == state]

    def leasable(self) -> list[Entry]:
        return sorted(self.in_state(READY), key=lambda e: (e.ready_at, e.seq))

    def produce(self, specs: list[Spec], ids: list[str]) -> None:
        """Check the ids the queue returned for ``specs`` and add the new items."""
        assert len(ids) == len(specs)
        by_key = {e.dedup_key: e.id for e in self.items.values() if e.dedup_key}
        for spec, item_id in zip(specs, ids, strict=True):
            if spec.dedup_key in by_key:
                assert item_id == by_key[spec.dedup_key], "dedup_key must return the holder's id"
                continue
            assert item_id not in self.items, f"new item reuses live id {item_id}"
            assert item_id not in self.gone, f"new item reuses the id of a finished {item_id}"
            self.seqs += 1
            state = SCHEDULED if spec.scheduled else READY
            entry = Entry(item_id, self.seqs, spec.payload, spec.dedup_key, state, self.tick)
            self.items[item_id] = entry
            if spec.dedup_key:
                by_key[spec.dedup_key] = item_id

    def reason(self, item_id: str, version: int, need_lease: bool) -> ConflictReason | None:
        entry = self.items.get(item_id)
        if entry is None:
            return MISSING
        if entry.version != version:
            return STALE
        if need_lease and entry.state != LEASED:
            return NOT_LEASED
        return None

    def lease(self, entry: Entry) -> None:
        entry.state, entry.version, entry.attempts = LEASED, entry.version + 1, entry.attempts + 1

    def remove(self, item_id: str) -> Entry:
        entry = self.items.pop(item_id)
        self.gone[item_id] = entry.version
        return entry

    def retry(self, item_id: str, later: bool, dead: bool) -> None:
        entry = self.items[item_id]
        if dead or entry.attempts >= MAX_ATTEMPTS:
            event(
                "dead-lettered by retry(dead=True)" if dead else "dead-lettered: attempts used up"
            )
            self.dead.append((item_id, self.remove(item_id).payload))
            return
        entry.version += 1
        entry.state = SCHEDULED if later else READY
        entry.ready_at = self.tick

    def renew(self, item_id: str) -> None:
        self.items[item_id].version += 1


class QueueMachine(RuleBasedStateMachine):
    """Drives ``client`` (set by a subclass) and the model side by side."""

    client: ClassVar[Querator]

    def __init__(self) -> None:
        super().__init__()
        base = f"model-{secrets.token_hex(4)}"
        self.main, self.dead, self.side = base, f"{base}-dead", f"{base}-side"
        q = self.client
        q.create_queue(self.dead)
        q.create_queue(self.side)
        settings_ = QueueSettings(
            lease_timeout=LEASE_TIMEOUT, max_attempts=MAX_ATTEMPTS, dead_queue=self.dead
        )
        self.queue_id = q.create_queue(self.main, settings_).queue_id
        self.model = Model()
        self.payloads = 0

    # -- drawing --------------------------------------------------------------
    def draw_specs(self, data: st.DataObject, low: int, high: int, keys: bool = True) -> list[Spec]:
        specs = []
        for _ in range(data.draw(st.integers(low, high), label="batch")):
            self.payloads += 1
            key = data.draw(DEDUP_KEYS, label="dedup_key") if keys else None
            scheduled = data.draw(st.integers(0, 5), label="scheduled") == 0
            specs.append(Spec(f"p{self.payloads}".encode(), key, scheduled))
        return specs

    def draw_held(self, data: st.DataObject, exclude: set[str], least: int = 0) -> list[Entry]:
        held = [e for e in self.model.in_state(LEASED) if e.id not in exclude]
        if not held:
            return []
        return data.draw(
            st.lists(st.sampled_from(held), unique_by=lambda e: e.id, min_size=least, max_size=3)
        )

    def bad_pools(self, need_lease: bool) -> dict[ConflictReason, list[tuple[str, int]]]:
        """Refs that must fail, grouped by the reason the model predicts."""
        m, qid = self.model, self.queue_id
        live = list(m.items.values())
        pools = {
            STALE: [(e.id, v) for e in live for v in (e.version - 1, e.version + 1) if v >= 1],
            MISSING: [*m.gone.items(), (f"{qid}.0.999999", 1), (f"{qid + 1000}.0.1", 1)],
        }
        if need_lease:
            pools[NOT_LEASED] = [(e.id, e.version) for e in live if e.state != LEASED]
        return pools

    def draw_bad(
        self, data: st.DataObject, exclude: set[str], need_lease: bool, least: int
    ) -> dict[str, tuple[int, ConflictReason]]:
        """Up to two refs that must fail, with the reason the model predicts."""
        pools = {
            reason: [ref for ref in pool if ref[0] not in exclude]
            for reason, pool in self.bad_pools(need_lease).items()
        }
        reasons = sorted(r for r, pool in pools.items() if pool)
        out: dict[str, tuple[int, ConflictReason]] = {}
        for _ in range(data.draw(st.integers(least, 2), label="bad count") if reasons else 0):
            reason = data.draw(st.sampled_from(reasons), label="bad reason")
            item_id, version = data.draw(st.sampled_from(pools[reason]), label="bad ref")
            if item_id not in out:
                assert self.model.reason(item_id, version, need_lease) == reason
                out[item_id] = (version, reason)
        return out

    # -- rules ------------------------------------------------------------------
    @initialize(data=st.data())
    def fill(self, data: st.DataObject) -> None:
        self.produce_specs(self.draw_specs(data, 2, 6))

    @rule(data=st.data())
    def produce(self, data: st.DataObject) -> None:
        self.produce_specs(self.draw_specs(data, 1, 6))

    def produce_specs(self, specs: list[Spec]) -> None:
        self.model.tick += 1
        ids = self.client.produce(self.main, [s.item() for s in specs])
        self.model.produce(specs, ids)

    @rule(batch=st.integers(1, 3))
    def lease_then_retry(self, batch: int) -> None:
        """Spend an attempt on the head items and send them to the tail."""
        leased = self.lease_and_check(batch)
        if leased:
            self.model.tick += 1
            self.client.retry(self.main, leased)
            for item in leased:
                self.model.retry(item.id, later=False, dead=False)

    @rule(batch=st.integers(1, 5))
    def lease(self, batch: int) -> None:
        self.lease_and_check(batch)

    def lease_and_check(self, batch: int) -> list[Leased]:
        """Lease ``batch`` items; the model says which, in which order, or RequestTimeout."""
        self.model.tick += 1
        expected = self.model.leasable()[:batch]
        event(f"lease: {len(expected)} of {batch} leasable")
        if not expected:
            with pytest.raises(RequestTimeout):
                self.client.lease(self.main, client_id=CLIENT, batch_size=batch, timeout=0)
            return []
        got = self.client.lease(self.main, client_id=CLIENT, batch_size=batch, timeout=0)
        assert [g.id for g in got] == [e.id for e in expected], "lease order differs"
        for leased, entry in zip(got, expected, strict=True):
            self.model.lease(entry)
            assert (leased.version, leased.attempts) == (entry.version, entry.attempts)
            assert leased.client_id == CLIENT
            assert leased.payload == entry.payload
        return got

    @precondition(lambda self: self.model.in_state(LEASED))
    @rule(data=st.data(), kind=st.sampled_from(CHANGES))
    def change(self, data: st.DataObject, kind: str) -> None:
        """complete/retry/renew held items under their current versions."""
        self.model.tick += 1
        good = self.draw_held(data, set(), least=1)
        refs = data.draw(st.permutations([(e.id, e.version) for e in good]), label="order")
        renewed = self.call_change(kind, refs)
        for entry in good:
            if kind == "complete":
                self.model.remove(entry.id)
            elif kind == "renew":
                self.model.renew(entry.id)
            else:
                self.model.retry(entry.id, later=kind == "retry-later", dead=kind == "retry-dead")
        if kind == "renew":
            assert {r.id: r.version for r in renewed} == {e.id: e.version for e in good}
            assert all(r.attempts == self.model.items[r.id].attempts for r in renewed)

    @rule(data=st.data(), kind=st.sampled_from(CHANGES))
    def change_with_bad_refs(self, data: st.DataObject, kind: str) -> None:
        """Mix in stale, never-leased or missing refs: Conflict names exactly those."""
        good = self.draw_held(data, set())
        bad = self.draw_bad(data, {e.id for e in good}, need_lease=True, least=1)
        refs = [(e.id, e.version) for e in good] + [(i, v) for i, (v, _) in bad.items()]
        with pytest.raises(Conflict) as err:
            self.call_change(kind, data.draw(st.permutations(refs), label="order"))
        assert err.value.reasons == {i: r for i, (_, r) in bad.items()}
        event(f"{kind} conflict: {sorted(r.value for _, r in bad.values())}")

    def call_change(self, kind: str, refs: list[tuple[str, int]]) -> list[Leased]:
        q = self.client
        if kind == "complete":
            q.complete(self.main, refs)
        elif kind == "renew":
            return list(q.renew(self.main, refs))
        else:
            later = utcnow() + timedelta(days=1) if kind == "retry-later" else None
            q.retry(self.main, refs, retry_at=later, dead=kind == "retry-dead")
        return []

    @rule(data=st.data())
    def transact(self, data: st.DataObject) -> None:
        self.model.tick += 1
        complete = self.draw_held(data, set())
        retry = self.draw_held(data, {e.id for e in complete})
        used = {e.id for e in complete + retry}
        others = [e for e in self.model.items.values() if e.id not in used]
        depends = self.draw_entries(data, others)
        used |= {e.id for e in depends}
        bad_complete = self.draw_bad(data, used, need_lease=True, least=0)
        bad_depends = self.draw_bad(data, used | set(bad_complete), need_lease=False, least=0)
        main_specs = self.draw_specs(data, 0, 2)
        side_specs = self.draw_specs(data, 0 if used or main_specs else 1, 2, keys=False)
        specs = {self.main: main_specs, self.side: side_specs}
        produce = {name: [s.item() for s in ss] for name, ss in specs.items() if ss}

        def send() -> TransactResult:
            return self.client.transact(
                complete=self.refs(complete, bad_complete),
                retry=self.refs(retry, {}),
                depends=self.refs(depends, bad_depends),
                produce=produce,
            )

        if bad_complete or bad_depends:
            with pytest.raises(Conflict) as err:
                send()
            assert err.value.reasons == {i: r for i, (_, r) in (bad_complete | bad_depends).items()}
            return
        result = send()
        for entry in complete:
            self.model.remove(entry.id)
        for entry in retry:
            self.model.retry(entry.id, later=False, dead=False)
        assert set(result.produced) == set(produce)
        self.model.produce(main_specs, result.produced.get(self.main, []))
        assert len(result.produced.get(self.side, [])) == len(side_specs)
        self.model.side += len(side_specs)
        assert result.renewed == []

    def draw_entries(self, data: st.DataObject, entries: list[Entry]) -> list[Entry]:
        if not entries:
            return []
        return data.draw(st.lists(st.sampled_from(entries), unique_by=lambda e: e.id, max_size=2))

    def refs(self, entries: list[Entry], bad: dict[str, tuple[int, ConflictReason]]) -> list[Ref]:
        good = [Ref(self.main, e.id, e.version) for e in entries]
        return good + [Ref(self.main, i, v) for i, (v, _) in bad.items()]

    # -- invariants -----------------------------------------------------------------
    @invariant()
    def queue_matches_model(self) -> None:
        m, q = self.model, self.client
        stats = q.stats(self.main)
        assert (stats.total, stats.leased, stats.scheduled) == (
            len(m.items),
            len(m.in_state(LEASED)),
            len(m.in_state(SCHEDULED)),
        )
        listed = q.list_items(self.main, limit=1000)
        assert [s.id for s in listed] == list(m.items), "items or their id order differ"
        for stored in listed:
            entry = m.items[stored.id]
            assert (stored.version, stored.attempts) == (entry.version, entry.attempts), stored.id
            assert (stored.payload, stored.dedup_key) == (entry.payload, entry.dedup_key)

    @invariant()
    def dead_queue_matches_model(self) -> None:
        q, m = self.client, self.model
        dead = q.list_items(self.dead, limit=1000)
        assert sorted((d.source_id or "", d.payload) for d in dead) == sorted(m.dead)
        assert all((d.version, d.attempts) == (1, 0) for d in dead)
        stats = q.stats(self.dead)
        assert (stats.total, stats.dead_lettered) == (len(m.dead), len(m.dead))
        assert q.stats(self.side).total == m.side


EXAMPLES = {"citus": 8, "http": 12, "http-protobuf": 12}
"""Examples per backend, 25 unless listed: each example creates three queues,
and Citus creates a queue's tables on a worker through the coordinator (about
a second each on the test machine), so fewer examples keep the suite's time;
the HTTP clients run the PostgreSQL backend behind a server (postgres itself
runs 25 examples), so their examples check the wire, 12 of them."""


def test_queue_behaves_like_the_model(q: Querator, backend_name: str) -> None:
    class Bound(QueueMachine):
        client = q

    run_state_machine_as_test(
        Bound,
        settings=settings(
            max_examples=EXAMPLES.get(backend_name, 25),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
