"""``AsyncQuerator.complete`` of Leased items of one partition runs as one
statement from their seqs and versions (``Backend.complete_table``): records it
cannot take whole (ids not spelt as querator spells them, an item named twice,
other partitions, pairs) take the general path and are reported as ever."""

from __future__ import annotations

import pickle

import pytest

from querator import AsyncQuerator, Item, Querator, QueueSettings
from querator.errors import Conflict, ConflictReason, InvalidArgument
from querator.queue.ids import parse_id

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_async_complete_of_one_table_and_of_what_it_cannot_take(pg_schema_url: str) -> None:
    async with AsyncQuerator(pg_schema_url) as aq:
        await aq.create_queue("one", QueueSettings(partitions=2))
        await aq.produce("one", [Item(payload=str(n).encode()) for n in range(8)])
        leased = await aq.lease("one", client_id="a", batch_size=8)
        by_partition = {p: [i for i in leased if i.partition == p] for p in (0, 1)}
        first, *rest = by_partition[0]
        address = parse_id(first.id)
        assert address is not None and rest
        misspelt = first.model_copy(
            update={"id": f"{address.queue_id}.{address.partition}.0{address.seq}"}
        )
        with pytest.raises(Conflict) as err:
            await aq.complete("one", [*rest, misspelt])
        assert err.value.reasons == {misspelt.id: ConflictReason.MISSING}
        with pytest.raises(InvalidArgument):
            await aq.complete("one", [first, first])
        await aq.complete("one", [first, *rest])  # one table: one statement
        with pytest.raises(Conflict) as err:
            await aq.complete("one", [first])  # done: gone
        assert err.value.reasons == {first.id: ConflictReason.MISSING}
        await aq.complete("one", [(i.id, i.version) for i in by_partition[1]])
        assert (await aq.stats("one")).total == 0


async def test_a_leased_batch_changed_after_the_lease_is_completed_by_what_it_holds(
    pg_schema_url: str,
) -> None:
    """A lease's batch knows its rows' seqs and versions, but only while it holds
    the records it came with: one replaced by its renewal completes at the new
    version, one replaced by a stale copy fails by id, and a batch cut short
    completes only what is left in it."""
    async with AsyncQuerator(pg_schema_url) as aq:
        await aq.create_queue("held")
        await aq.produce("held", [Item(payload=str(n).encode()) for n in range(9)])
        batch = await aq.lease("held", client_id="a", batch_size=3)
        [renewed] = await aq.renew("held", batch[1:2])
        batch[1] = renewed  # the old version would fail the check
        await aq.complete("held", batch)

        batch = await aq.lease("held", client_id="a", batch_size=3)
        stale = batch[2].model_copy(update={"version": batch[2].version - 1})
        batch[2] = stale
        with pytest.raises(Conflict) as err:
            await aq.complete("held", batch)
        assert err.value.reasons == {stale.id: ConflictReason.STALE}
        del batch[2]
        await aq.complete("held", batch)  # the first two only
        assert (await aq.stats("held")).leased == 1

        batch = await aq.lease("held", client_id="a", batch_size=3)
        assert batch == list(batch) and pickle.loads(pickle.dumps(batch)) == batch
        await aq.complete("held", pickle.loads(pickle.dumps(batch)))
        with pytest.raises(Conflict):
            await aq.lease("held", client_id="a", complete=batch)  # done: gone


def test_the_sync_client_completes_a_changed_batch_by_what_it_holds(pg_schema_url: str) -> None:
    """As above, on the sync client's calling-thread path, completing through the
    next lease."""
    with Querator(pg_schema_url) as q:
        q.create_queue("held")
        q.produce("held", [Item(payload=str(n).encode()) for n in range(6)])
        batch = q.lease("held", client_id="a", batch_size=3)
        [renewed] = q.renew("held", batch[:1])
        batch[0] = renewed
        batch = q.lease("held", client_id="a", batch_size=3, complete=batch)
        assert q.stats("held").total == 3
        batch[1] = batch[1].model_copy(update={"version": batch[1].version + 1})
        with pytest.raises(Conflict) as err:
            q.complete("held", batch)
        assert err.value.reasons == {batch[1].id: ConflictReason.STALE}
        assert q.stats("held").total == 3
