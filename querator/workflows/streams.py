"""Streams of a run: ``write_stream``/``close_stream`` inside a workflow body or
a step, ``read_stream`` from anywhere.

A stream is the run's records under ``{run}/stream/{key}/`` (see
:mod:`.keys`), read in key order up to the first close mark (a record with
no result): a value the body writes sits at the body's
position (stored with its next commit, once: a replay finds the record and
writes nothing), a value a step writes sits at the step call's position and
its count in the attempt (committed at once; a retried attempt that writes
the same count again is a no-op, the first value stays). A reader reads a
value only once every earlier position of the run has its record (steps of
a gather may still write there), so its cursor never passes a value still to
come and an offset names one value for good. Each write commits
to the results queue, which wakes its watchers (NOTIFY on PostgreSQL, local
wakeups on SQLite): a reader waits on that, not by polling.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.from_thread

from querator.errors import InvalidArgument, QueueNotFound, UsageError
from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.workflows.engine.context import CURRENT
from querator.workflows.errors import RunNotFound
from querator.workflows.keys import (
    RESULTS_QUEUE,
    WRITE_STREAM_STEP,
    meta_key,
    result_key,
    step_key,
    stream_key,
    stream_prefix,
)
from querator.workflows.messages import _check_run_id, check_topic, check_value
from querator.workflows.step_context import CURRENT_STEP, StepContext
from querator.workflows.stored import StepRecord, record_item

__all__ = [
    "StreamPage",
    "close_stream",
    "close_stream_async",
    "read_stream",
    "read_stream_async",
    "read_stream_page_async",
    "write_stream",
    "write_stream_async",
]

_PAGE = 1000
_SETTLE_WINDOW = 64
"""Positions looked up at once while finding the first without a record."""
_WAIT_SLICE = 5.0
"""The longest a waiting reader sleeps before it looks again (a missed wakeup's bound)."""


def _step_items(ctx: StepContext, key: str, text: str | None) -> dict[str, list[Any]]:
    """The results-queue item of a step's write (None: the close mark)."""
    record = StepRecord(step=WRITE_STREAM_STEP, ok=True, result=text, attempts=ctx.attempt)
    seq = ctx.streamed.get(key, 0)
    ctx.streamed[key] = seq + 1
    where = stream_key(ctx.run_id, key, ctx.position, seq)
    return {RESULTS_QUEUE: [record_item(where, record, ctx.run_id)]}


def _write(key: str, text: str | None, name: str) -> StepContext | None:
    """Write from a body (done here), or the step context to write from."""
    check_topic(key, "key")
    body = CURRENT.get()
    if body is not None:
        body.write_stream(key, text)
        return None
    ctx = CURRENT_STEP.get()
    if ctx is None:
        raise UsageError(f"{name}() is called inside a workflow body or a step only")
    return ctx


def write_stream(key: str, value: Any) -> None:
    """Append ``value`` (anything JSON holds) to this run's stream ``key``.

    Inside a workflow body the value is stored with the body's next commit
    (when it next waits or ends), once: a replay writes nothing. Inside a step
    it is committed at once; a retried attempt that writes its n-th value
    again leaves the first one. Readers (:func:`read_stream`) are woken by
    the commit. Values from the body and from one step at a time keep their
    order; values written by steps running at the same time come in the
    order of the steps' positions.
    """
    ctx = _write(key, check_value(value), "write_stream")
    if ctx is not None:
        anyio.from_thread.run(_commit, ctx, key, check_value(value), token=ctx.token)


def close_stream(key: str) -> None:
    """Close this run's stream ``key``: readers end after its last value.
    (A stream also ends when its run ends.) Writes after it are not read."""
    ctx = _write(key, None, "close_stream")
    if ctx is not None:
        anyio.from_thread.run(_commit, ctx, key, None, token=ctx.token)


async def _commit(ctx: StepContext, key: str, text: str | None) -> None:
    await ctx.aq.commit(produce=_step_items(ctx, key, text))


async def write_stream_async(key: str, value: Any) -> None:
    """:func:`write_stream` for async workflow bodies and async steps."""
    ctx = _write(key, check_value(value), "write_stream_async")
    if ctx is not None:
        await _commit(ctx, key, check_value(value))


async def close_stream_async(key: str) -> None:
    """:func:`close_stream` for async workflow bodies and async steps."""
    ctx = _write(key, None, "close_stream_async")
    if ctx is not None:
        await _commit(ctx, key, None)


def _check_read(run_id: object, key: object, offset: object) -> tuple[str, str, int]:
    run_id = _check_run_id(run_id)
    check_topic(key, "key")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument("offset", f"must be a whole number >= 0, got {offset!r}")
    return run_id, str(key), offset


@dataclass(frozen=True)
class StreamPage:
    """What :func:`read_stream_page_async` found."""

    values: list[Any]
    """The values from the offset asked for, in stream order (maybe none)."""
    next_offset: int
    """The offset to ask for next (the offset asked for plus the values here)."""
    ended: bool
    """True when no value comes after these: the stream is closed or its run ended."""
    after: str | None = None
    """The last key read (a reader's cursor, so the next look skips by key)."""
    settled: int = 0
    """The first position of the run with no record yet, as last seen (a
    reader's cursor never passes it: see :func:`_page`)."""


async def _settled(aq: AsyncQueueClient, run_id: str, start: int) -> int:
    """The first position from ``start`` whose call has no record yet."""
    position = start
    while True:
        window = range(position, position + _SETTLE_WINDOW)
        found = await aq.lookup(RESULTS_QUEUE, [step_key(run_id, p) for p in window])
        for p in window:
            if step_key(run_id, p) not in found:
                return p
        position += _SETTLE_WINDOW


def _position(key: str | None, prefix: str) -> int:
    """The position a stream value's key names (the writer's position)."""
    head = (key or "")[len(prefix) :].partition("/")[0]
    return int(head) if head.isdigit() else 0


async def _page(
    aq: AsyncQueueClient,
    run_id: str,
    key: str,
    offset: int,
    after: str | None,
    timeout: float,
    settled: int = 0,
) -> StreamPage:
    """Values past ``after`` (skipping the first ``offset`` counted from the
    start when ``after`` is None), waiting up to ``timeout`` for the first.

    Values sit in key order (the writer's position, then its count), and a
    value is read only once every position before the writer's has its
    record (``settled``): steps that run at once (a gather) may still write
    at an earlier position, and a cursor past it would miss that value. So
    concurrent steps' values come in position order, each once its earlier
    positions ended; once the run ended, everything stored is read.
    """
    prefix = stream_prefix(run_id, key)
    watch = aq.watch(RESULTS_QUEUE)
    deadline = anyio.current_time() + timeout
    skip = offset if after is None else 0
    try:
        found = await aq.lookup(RESULTS_QUEUE, [meta_key(run_id), result_key(run_id)])
    except QueueNotFound:
        found = {}
    if meta_key(run_id) not in found:
        raise RunNotFound(run_id)
    ended = result_key(run_id) in found
    values: list[Any] = []
    while True:
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=after, limit=_PAGE)
        blocked = False
        for item in page:
            position = _position(item.dedup_key, prefix)
            if not ended and position > settled:
                settled = await _settled(aq, run_id, settled)
                if position > settled:  # an earlier call may still write: wait for it
                    blocked = True
                    break
            record = StepRecord.model_validate_json(item.payload)
            if record.result is None:  # the close mark
                return StreamPage(values, offset + len(values), True, after, settled)
            after = item.dedup_key
            if skip:
                skip -= 1
                continue
            values.append(json.loads(record.result or "null"))
        if len(page) == _PAGE and not blocked:
            continue
        if values or (ended and not blocked):
            return StreamPage(values, offset + len(values), ended, after, settled)
        left = deadline - anyio.current_time()
        if left <= 0:
            return StreamPage(values, offset, False, after, settled)
        await watch.wait(min(left, _WAIT_SLICE))
        stored = await aq.lookup(RESULTS_QUEUE, [result_key(run_id)])
        ended = result_key(run_id) in stored


async def read_stream_page_async(
    aq: AsyncQueueClient, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
) -> StreamPage:
    """The values of run ``run_id``'s stream ``key`` from the ``offset``-th,
    waiting up to ``timeout`` seconds for the first one (a long poll: the HTTP
    API's ``runs.read_stream``). Raises as :func:`read_stream` does."""
    run_id, key, offset = _check_read(run_id, key, offset)
    timeout = check_duration("timeout", timeout, allow_zero=True)
    page = await _page(aq, run_id, key, offset, None, timeout)
    return replace(page, after=None, settled=0)


async def read_stream_async(
    aq: AsyncQueueClient, run_id: str, key: str, offset: int = 0
) -> AsyncIterator[Any]:
    """:func:`read_stream` for async callers: ``async for value in read_stream_async(...)``."""
    run_id, key, offset = _check_read(run_id, key, offset)
    after: str | None = None
    settled = 0
    while True:
        page = await _page(aq, run_id, key, offset, after, _WAIT_SLICE, settled)
        for value in page.values:
            yield value
        if page.ended:
            return
        offset, after, settled = page.next_offset, page.after, page.settled


def read_stream(q: QueueClient, run_id: str, key: str, offset: int = 0) -> Iterator[Any]:
    """The values of run ``run_id``'s stream ``key``, from the ``offset``-th
    (0: the first), as they are written: the iteration waits for the next
    value (woken by the commit that writes it) and ends when the stream is
    closed or the run has ended. Pass the count of values read so far as
    ``offset`` to resume. Raises :class:`~querator.workflows.errors.RunNotFound`
    for an unknown run and :class:`~querator.errors.InvalidArgument` for a bad
    key or offset (the arguments are checked at the call, before iterating).
    """
    run_id, key, offset = _check_read(run_id, key, offset)
    return _iterate(q, run_id, key, offset)


def _iterate(q: QueueClient, run_id: str, key: str, offset: int) -> Iterator[Any]:
    after: str | None = None
    settled = 0
    while True:
        page = q.call(_page, q.aio, run_id, key, offset, after, _WAIT_SLICE, settled)
        yield from page.values
        if page.ended:
            return
        offset, after, settled = page.next_offset, page.after, page.settled
