"""``AsyncQuerator.complete`` of Leased items of one partition runs as one
statement from their seqs and versions (``Backend.complete_table``): records it
cannot take whole (ids not spelt as querator spells them, an item named twice,
other partitions, pairs) take the general path and are reported as ever."""

from __future__ import annotations

import pytest

from querator import AsyncQuerator, Item, QueueSettings
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
