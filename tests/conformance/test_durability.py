"""Data outlives the client: close it, open another, find everything as it was."""

from __future__ import annotations

import pytest

from querator import Item, Querator, QueueSettings

from .helpers import ids_of, lease_one, same_instant


def test_data_survives_closing_and_reopening(
    backend_name: str, backend_url: str, qname: str
) -> None:
    if backend_name == "memory":
        pytest.skip("memory:// keeps nothing once its client closes")
    settings = QueueSettings(lease_timeout=60, max_attempts=3, partitions=2, reference="ops")
    first = Querator(backend_url)
    with first:
        info = first.create_queue(qname, settings)
        ids = first.produce(
            qname,
            [Item(payload=b"kept", kind="k", headers={"a": "b"}, partition_key="p")] * 3,
        )
        held = lease_one(first, qname, client_id="before-close")

    with Querator(backend_url) as second:
        assert second.get_queue(qname) == info
        stats = second.stats(qname)
        assert (stats.total, stats.leased) == (3, 1)
        stored = [s for p in range(2) for s in second.list_items(qname, partition=p)]
        assert sorted(ids_of(stored)) == sorted(ids)
        (again,) = [s for s in stored if s.id == held.id]
        assert again.version == held.version
        assert again.client_id == "before-close"
        assert same_instant(again.lease_deadline, held.lease_deadline)
        assert {(s.payload, s.kind) for s in stored} == {(b"kept", "k")}
        second.complete(qname, [held])  # the lease still holds across clients
        assert second.stats(qname).total == 2


def test_close_is_idempotent_and_context_manager_closes(backend_url: str, qname: str) -> None:
    client = Querator(backend_url)
    with client:
        client.create_queue(qname)
    client.close()
