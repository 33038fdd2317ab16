"""The two-slot compare-and-set record store (``querator.queue.record_store``),
on every backend: what cron schedules, webhook endpoints and step progress
are kept in."""

from __future__ import annotations

import logging

import pytest
from pydantic import ConfigDict

from querator import Item, Querator
from querator.queue.record_store import SLOTS, RecordStore, Versioned
from querator.workflows.keys import progress_key, step_key
from querator.workflows.progress import PROGRESS
from querator.workflows.stored import ProgressRecord


class Note(Versioned):
    """A record of the tests."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    text: str


def store(queue: str) -> RecordStore[Note]:
    return RecordStore(queue, Note, kind="test.note", prefix="note/")


def test_writes_alternate_slots_and_leave_one_record(q: Querator, qname: str) -> None:
    notes = store(qname)
    q.call(notes.ensure, q.aio)
    first = q.call(notes.write, q.aio, "n", None, Note(text="one"))
    assert first is not None and (first.record.gen, first.slot) == (0, "a")
    second = q.call(notes.write, q.aio, "n", first, Note(text="two"))
    assert second is not None and (second.record.gen, second.slot) == (1, "b")
    read = q.call(notes.read, q.aio, "n")
    assert read is not None and read.record.text == "two" and read.stale is None
    assert len(q.lookup(qname, [notes.key("n", slot) for slot in SLOTS])) == 1  # old one gone
    assert q.call(notes.read, q.aio, "missing") is None


def test_two_writers_of_one_generation_never_both_win(q: Querator, qname: str) -> None:
    notes = store(qname)
    q.call(notes.ensure, q.aio)
    base = q.call(notes.write, q.aio, "n", None, Note(text="base"))
    assert base is not None
    won = q.call(notes.write, q.aio, "n", base, Note(text="first"))
    lost = q.call(notes.write, q.aio, "n", base, Note(text="second"))  # from the same read
    assert won is not None and lost is None
    read = q.call(notes.read, q.aio, "n")
    assert read is not None and read.record.text == "first"
    q.call(notes.write, q.aio, "n", None, Note(text="blind"))  # a create that read nothing
    read = q.call(notes.read, q.aio, "n")
    assert read is not None and read.record.text == "first"  # the higher generation wins


def test_read_all_and_read_many_pick_the_newest_and_skip_damage(
    q: Querator, qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    notes = store(qname)
    assert q.call(notes.read_all, q.aio) == []  # no queue yet: no records
    q.call(notes.ensure, q.aio)
    for name in ("b", "a"):
        current = q.call(notes.write, q.aio, name, None, Note(text=f"{name}0"))
        q.call(notes.write, q.aio, name, current, Note(text=f"{name}1"))
    q.produce(qname, [Item(payload=b"{damaged", kind="test.note", dedup_key="note/c/a")])
    told: set[str] = set()
    with caplog.at_level(logging.ERROR, logger="querator.records"):
        for _ in range(2):
            found = q.call(notes.read_all, q.aio, told)
            assert [(s.record.text, s.record.gen) for s in found] == [("a1", 1), ("b1", 1)]
    assert len(caplog.records) == 1 and "note/c/a" in caplog.records[0].getMessage()
    many = q.call(notes.read_many, q.aio, ["a", "c", "zz"])
    assert {name: s.record.text for name, s in many.items()} == {"a": "a1"}


def test_a_left_over_older_record_loses_and_is_deleted_by_the_next_write(
    q: Querator, qname: str
) -> None:
    notes = store(qname)
    q.call(notes.ensure, q.aio)
    old = Note(text="old", gen=4).model_dump_json().encode()
    new = Note(text="new", gen=5).model_dump_json().encode()
    q.produce(qname, [Item(payload=old, kind="test.note", dedup_key="note/n/a")])
    q.produce(qname, [Item(payload=new, kind="test.note", dedup_key="note/n/b")])
    current = q.call(notes.read, q.aio, "n")
    assert current is not None and current.record.text == "new" and current.stale is not None
    written = q.call(notes.write, q.aio, "n", current, Note(text="newer"))
    assert written is not None and (written.record.gen, written.slot) == (6, "a")
    assert len(q.lookup(qname, [notes.key("n", slot) for slot in SLOTS])) == 1


def test_progress_records_keep_their_keys_and_read_older_ones() -> None:
    name = step_key("run-1", 3)
    assert [PROGRESS.key(name, slot) for slot in SLOTS] == [
        progress_key("run-1", 3, slot) for slot in SLOTS
    ]
    older = b'{"attempt": 1, "seq": 7, "progress": {"done": 1}}'
    assert ProgressRecord.model_validate_json(older).gen == 7
