"""Rate limits over HTTP: ``/v1/limits.acquire`` and the HTTP clients'
``try_acquire_rate`` / ``acquire_rate``, the library's RateLimiter on the
server's store (same slots, same answers, same errors)."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest

from querator.errors import InvalidArgument, RequestTimeout
from querator.http import AsyncQuerator, Querator


def test_starts_are_counted_per_key_and_spread_over_the_period(server: str) -> None:
    with Querator(server) as h:
        first = h.try_acquire_rate("h-spread", 2, per=60.0, key="k")
        assert first.allowed and first.at is not None
        second = h.try_acquire_rate("h-spread", 2, per=60.0, key="k")
        assert not second.allowed and second.at is None
        assert 25 < second.retry_after <= 30, "the second slot comes half a period later"
        assert h.try_acquire_rate("h-spread", 2, per=60.0, key="other").allowed
        with pytest.raises(RequestTimeout):
            h.acquire_rate("h-spread", 2, per=60.0, key="k", timeout=0.2)
        with pytest.raises(InvalidArgument, match="exists with"):
            h.try_acquire_rate("h-spread", 3, per=60.0, key="k")


def test_a_wait_is_admitted_when_the_next_slot_comes(server: str) -> None:
    async def admitted() -> float:
        async with AsyncQuerator(server) as a:
            assert (await a.try_acquire_rate("h-wait", 4, per=1.0)).allowed
            started = time.monotonic()
            await a.acquire_rate("h-wait", 4, per=1.0, timeout=10)
            return time.monotonic() - started

    waited = anyio.run(admitted)
    assert 0.1 < waited < 5, f"the next of 4 slots a second comes ~0.25 s later, not {waited}"


def test_bad_input_is_refused_before_anything_is_written(server: str) -> None:
    with Querator(server) as h:
        for args, kwargs, field in [
            (("h-bad", 0), {}, "n"),
            (("", 5), {}, "name"),
            (("h-bad", 5), {"per": -1.0}, "per"),
            (("h-bad", 5), {"key": ""}, "key"),
            (("h-bad", 5), {"client_id": ""}, "client_id"),
        ]:
            with pytest.raises(InvalidArgument) as caught:
                h.try_acquire_rate(*args, **kwargs)  # type: ignore[arg-type]
            assert caught.value.field == field
        # the server checks them too (curl), and answers 400 before writing
        for body, field in [
            ({"name": "h-bad", "n": 0}, "n"),
            ({"name": "h-bad", "n": 5, "key": "nul\u0000"}, "key"),
            ({"name": "h-bad", "n": 5, "per": "0s"}, "per"),
            ({"name": "h-bad", "n": 5, "request_timeout": "16m"}, "request_timeout"),
        ]:
            answer = httpx.post(f"{server}/v1/limits.acquire", json=body, timeout=10)
            assert answer.status_code == 400, answer.text
            assert field in answer.text
        assert "querator.rate.h-bad" not in {info.name for info in h.list_queues(limit=1000)}
