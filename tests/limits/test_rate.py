"""Rate limits: smooth, per key, enforced in the store across processes."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import anyio
import pytest

from querator import Querator
from querator.errors import InvalidArgument, UsageError
from querator.limits import RateLimit, RateLimiter

STARTER = Path(__file__).with_name("starter.py")


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (("api", 0), {}, "n"),
        (("api", -5), {}, "n"),
        (("api", 2.5), {}, "n"),
        (("api", True), {}, "n"),
        (("api", 10), {"per": math.nan}, "per"),
        (("api", 10), {"per": -1.0}, "per"),
        (("api", 10), {"per": 0}, "per"),
        (("api", 10), {"per": math.inf}, "per"),
        (("", 10), {}, "name"),
        (("a" * 201, 10), {}, "name"),
        (("bell\x07", 10), {}, "name"),
        (("new\nline", 10), {}, "name"),
        (("api", 10), {"key": "tenant"}, "key"),
    ],
)
def test_bad_limits_are_typed_errors(
    args: tuple[object, ...], kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        RateLimit(*args, **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_bad_use_writes_nothing(q: Querator) -> None:
    with pytest.raises(InvalidArgument):
        RateLimiter(q, "api")  # type: ignore[arg-type]
    limiter = RateLimiter(q, RateLimit("api", 5, per=1.0))
    for key in ["", "x" * 401, "nul\x00", 7]:
        with pytest.raises(InvalidArgument):
            limiter.try_acquire(key)  # type: ignore[arg-type]
    assert q.lookup("querator.rate.api", ["s0." + "0" * 32]) == {}
    assert q.stats("querator.rate.api").total == 0, "no key's slots were made"
    with pytest.raises(InvalidArgument):
        RateLimiter(q, RateLimit("api", 6, per=1.0))  # exists with another n
    assert [info.name for info in q.list_queues()] == ["querator.rate.api"]


def test_starts_are_spread_over_the_period(q: Querator) -> None:
    limiter = RateLimiter(q, RateLimit("spread", 2, per=60.0))
    first = limiter.try_acquire("k")
    assert first.allowed and first.at is not None
    second = limiter.try_acquire("k")
    assert not second.allowed, "the second slot comes half a period later: no burst"
    assert 25 < second.retry_after <= 30
    other = limiter.try_acquire("other")
    assert other.allowed, "keys are limited apart"


def test_a_sync_call_inside_a_loop_names_the_async_twin(q: Querator) -> None:
    limiter = RateLimiter(q, RateLimit("loop", 5))

    async def inside() -> None:
        limiter.try_acquire("k")

    with pytest.raises(UsageError, match="AsyncRateLimiter"):
        anyio.run(inside)


def test_three_processes_keep_every_key_at_its_rate(pg_schema_url: str, tmp_path: Path) -> None:
    n, per, keys, seconds = 50, 1.0, 4, 5.0
    log = tmp_path / "starts.log"
    with Querator(pg_schema_url) as q:
        RateLimiter(q, RateLimit("proof", n, per=per))  # made before the processes race
    args = [pg_schema_url, "proof", str(n), str(per), str(keys), str(seconds), str(log)]
    procs = [subprocess.Popen([sys.executable, str(STARTER), *args]) for _ in range(3)]
    for proc in procs:
        assert proc.wait(120) == 0
    starts: dict[str, list[float]] = defaultdict(list)
    for line in log.read_text().splitlines():
        key, at = line.split()
        starts[key].append(float(at))
    assert sorted(starts) == [f"tenant-{index}" for index in range(keys)]
    for key, instants in starts.items():
        instants.sort()
        most = max(_in_window(instants, index, per) for index in range(len(instants)))
        assert most <= n, f"{key}: {most} starts within {per}s"
        # the steady rate, away from the ends of the window (processes start apart)
        inner = [at for at in instants if instants[0] + 1 <= at < instants[-1] - 1]
        rate = len(inner) / (instants[-1] - 1 - (instants[0] + 1))
        assert abs(rate - n / per) <= 0.05 * n / per, f"{key}: {rate:.1f}/s"


def _in_window(instants: list[float], first: int, per: float) -> int:
    """How many instants fall in [instants[first], instants[first] + per)."""
    end = instants[first] + per
    count = 0
    for at in instants[first:]:
        if at >= end:
            break
        count += 1
    return count
