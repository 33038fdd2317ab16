"""Bad input is a typed error naming what was wrong, and nothing is written."""

from __future__ import annotations

import math

import pytest

from querator import AsyncQuerator, Querator
from querator.errors import InvalidArgument
from querator.locks import AsyncSemaphore, Lock, Semaphore

BAD_LIMITS = [0, -1, math.nan, math.inf, 1.5, 2.0, True, "2", None, 1_001]
BAD_NAMES = ["", "x" * 201, "a\x00b", "a\nb", "tab\there", "a b", "ümlaut", "a/b", 7]
BAD_LEASES = [0, -1, math.nan, math.inf, 0.01, 86_401, "15"]


@pytest.mark.parametrize("limit", BAD_LIMITS, ids=repr)
def test_bad_limits(q: Querator, limit: object) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Semaphore(q, "ok", limit)  # type: ignore[arg-type]
    assert raised.value.field == "limit"
    assert q.list_queues() == []


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_names(q: Querator, name: object) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Lock(q, name)  # type: ignore[arg-type]
    assert raised.value.field == "name"
    assert len(str(raised.value)) < 200, "a long name is not repeated whole"
    assert q.list_queues() == []


@pytest.mark.parametrize("lease", BAD_LEASES, ids=repr)
def test_bad_leases(q: Querator, lease: object) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Lock(q, "ok", lease=lease)  # type: ignore[arg-type]
    assert raised.value.field == "lease"
    assert q.list_queues() == []


@pytest.mark.parametrize("client_id", ["", "a b", "x" * 481, "a\x00"], ids=repr)
def test_bad_client_ids(q: Querator, client_id: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Lock(q, "ok", client_id=client_id)
    assert raised.value.field == "client_id"
    assert q.list_queues() == []


@pytest.mark.parametrize("timeout", [-1, math.nan, "5"], ids=repr)
def test_bad_timeouts(q: Querator, timeout: object) -> None:
    lock = Lock(q, "ok")
    with pytest.raises(InvalidArgument) as raised:
        lock.acquire_permit(timeout)  # type: ignore[arg-type]
    assert raised.value.field == "timeout"
    assert q.stats("querator.lock.ok").leased == 0


@pytest.mark.anyio
async def test_the_async_twin_checks_before_any_io(aq: AsyncQuerator) -> None:
    with pytest.raises(InvalidArgument):
        AsyncSemaphore(aq, "ok", 0)
    assert await aq.list_queues() == []
