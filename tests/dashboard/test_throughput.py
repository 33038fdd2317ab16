"""The queues' throughput sampler of the dashboard, over a real store: what
went into a queue and out of it between two samples."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from pg_schemas import drop_schema, with_query

from querator import AsyncQuerator, Item
from querator.dashboard.throughput import INTERVAL, INTERVAL_ENV, Sampler, interval_from_env


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of the test's own: a SQLite file or a PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'throughput.db'}"
        return
    dsn = str(request.getfixturevalue("pg_dsn"))
    schema = f"t_{secrets.token_hex(8)}"
    try:
        yield with_query(dsn, schema=schema)
    finally:
        drop_schema(dsn, schema)


async def _sampled(store: str) -> list[list[tuple[int | None, int | None]]]:
    """The bars of a queue after each of: creation, a churn, a quiet interval,
    its deletion."""
    seen: list[list[tuple[int | None, int | None]]] = []
    async with AsyncQuerator(store) as aq:
        sampler = Sampler(aq)

        async def sample() -> None:
            await sampler.sample()
            line = sampler.line("work")
            seen.append([] if line is None else [(b.went_in, b.went_out) for b in line.bars])

        await aq.create_queue("work")
        await sample()
        await aq.produce("work", [Item(payload=b"x") for _ in range(5)])
        leased = await aq.lease("work", client_id="w1", batch_size=3, timeout=10)
        assert len(leased) == 3
        await aq.complete("work", leased)
        await sample()
        await sample()
        await aq.delete_queue("work", force=True)
        await sample()
    return seen


def test_the_sampler_draws_what_went_in_and_out_between_samples(store: str) -> None:
    seen = anyio.run(_sampled, store)
    assert seen == [[], [(5, 3)], [(5, 3), (0, 0)], []]


@pytest.mark.parametrize(
    ("value", "interval"), [("", INTERVAL), ("2.5", 2.5), ("0", INTERVAL), ("soon", INTERVAL)]
)
def test_the_interval_comes_from_the_environment_when_it_is_sound(
    value: str, interval: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INTERVAL_ENV, value)
    assert interval_from_env() == interval
