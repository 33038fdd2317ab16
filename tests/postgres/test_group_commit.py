"""Group commit (``postgres/group_commit.py``): transactions that arrive while one
is in flight go together in one statement, each still all or nothing."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import anyio
import psycopg
import pytest
from pg_schemas import waiting_on_a_lock
from polling import await_for

from querator import AsyncQuerator, Item, Leased, Ref
from querator.errors import Conflict, ConflictReason
from querator.queue.models import TransactResult

pytestmark = pytest.mark.anyio

WAITERS = 12


async def _as_one_group(
    aq: AsyncQuerator,
    pg_dsn: str,
    pg_schema: str,
    leader: tuple[int, Leased],
    followers: Iterable[tuple[int, Leased | Ref]],
    commit: Callable[[int, Any], Coroutine[Any, Any, None]],
) -> None:
    """``commit`` the leader's item while another session holds its row lock, queue
    every follower's commit behind it, then let go: the followers go as one group."""
    number, item = leader
    queue = f"q{item.id.split('.')[0]}_p0"
    group = aq._backend._group  # type: ignore[attr-defined]
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute(
            f'SELECT 1 FROM "{pg_schema}".{queue} WHERE seq = %s FOR UPDATE',
            (int(item.id.split(".")[-1]),),
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(commit, number, item)
            await await_for(lambda: waiting_on_a_lock(pg_dsn, queue))
            queued = 0
            for follower in followers:
                tasks.start_soon(commit, *follower)
                queued += 1
            await await_for(lambda: len(group._waiting) == queued)
            blocker.commit()


async def test_a_group_commits_each_transaction_and_a_stale_one_alone_fails(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    async with AsyncQuerator(pg_schema_url) as aq:
        await aq.create_queue("work")
        await aq.create_queue("records")
        await aq.produce("work", [Item(payload=b"first")])
        (first,) = await aq.lease("work", client_id="leader")
        await aq.produce("work", [Item(payload=f"{n}".encode()) for n in range(WAITERS)])
        held = await aq.lease("work", client_id="c", batch_size=WAITERS)
        stale = held[0]
        outcomes: dict[int, TransactResult | Exception] = {}

        async def commit(number: int, item: Leased | Ref) -> None:
            try:
                outcomes[number] = await aq.commit(
                    complete=[item],
                    produce={"records": [Item(payload=b"r", dedup_key=f"rec-{number}")]},
                    produce_leased={"work": [Item(payload=b"next", dedup_key=f"next-{number}")]},
                    client_id=f"client-{number}",
                    lookup={"records": [f"rec-{number}", "rec-none"]},
                )
            except Conflict as exc:
                outcomes[number] = exc

        followers: list[tuple[int, Leased | Ref]] = [
            (0, Ref("work", stale.id, stale.version + 1)),
            *enumerate(held[1:], 1),
        ]
        await _as_one_group(aq, pg_dsn, pg_schema, (-1, first), followers, commit)
        stale_outcome = outcomes.pop(0)
        assert isinstance(stale_outcome, Conflict)
        assert stale_outcome.reasons == {stale.id: ConflictReason.STALE}
        assert sorted(outcomes) == [n for n in range(-1, WAITERS) if n != 0]
        for number, result in outcomes.items():
            assert isinstance(result, TransactResult), result
            (record,) = result.produced["records"]
            (leased,) = result.leased["work"]
            assert leased is not None and leased.client_id == f"client-{number}"
            assert leased.payload == b"next"
            assert result.found["records"]["rec-" + str(number)].id == record
            assert "rec-none" not in result.found["records"]
        records = await aq.lookup("records", [f"rec-{n}" for n in range(-1, WAITERS)])
        assert sorted(records) == sorted(f"rec-{n}" for n in range(-1, WAITERS) if n != 0)
        left = {item.id for item in await aq.list_items("work")}
        assert stale.id in left  # the stale transaction changed nothing
        assert not left & {item.id for item in held[1:]}


async def test_two_transactions_of_a_group_producing_one_dedup_key_share_its_item(
    pg_schema_url: str, pg_dsn: str, pg_schema: str
) -> None:
    async with AsyncQuerator(pg_schema_url) as aq:
        await aq.create_queue("work")
        await aq.create_queue("out")
        await aq.produce("work", [Item(payload=f"{n}".encode()) for n in range(3)])
        first, *others = await aq.lease("work", client_id="c", batch_size=3)
        ids: dict[int, list[str]] = {}

        async def commit(number: int, item: Leased) -> None:
            result = await aq.transact(
                complete=[item], produce={"out": [Item(payload=b"same", dedup_key="k")]}
            )
            ids[number] = result.produced["out"]

        await _as_one_group(aq, pg_dsn, pg_schema, (0, first), enumerate(others, 1), commit)
        (held,) = [item.id for item in await aq.list_items("out")]
        assert ids == {0: [held], 1: [held], 2: [held]}
        assert (await aq.stats("work")).total == 0
