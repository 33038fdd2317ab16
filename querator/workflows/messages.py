"""Messages to a run: ``send`` from anywhere, ``recv`` inside the run's body.

A message goes to the run's mailbox (:mod:`.engine.mailbox`) with a wake task
for the run, in one transaction: a run waiting in ``recv`` holds no worker and
is woken by that commit, not by polling. ``recv`` reads the oldest unread
message on its topic and records it in the run's history in the transaction
that reads it, so each message is read once, in send order per topic, and a
replay reads the same messages at the same positions.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import anyio

from querator.errors import InvalidArgument, QueueNotFound, UsageError
from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.telemetry import runs as runs_telemetry
from querator.workflows.engine.context import CURRENT
from querator.workflows.engine.mailbox import mailbox_mark, message_item, recv_value, sent_wake
from querator.workflows.errors import RunFinished, RunNotFound
from querator.workflows.functions import WorkflowFunction
from querator.workflows.keys import RESULTS_QUEUE, event_prefix, meta_key, result_key
from querator.workflows.runs import AsyncRunHandle, RunHandle, check_start, create_run
from querator.workflows.stored import RunMeta, StepRecord, wake_item

__all__ = [
    "get_event",
    "get_event_async",
    "recv",
    "recv_async",
    "send",
    "send_async",
    "set_event",
    "set_event_async",
    "signal_with_start",
    "signal_with_start_async",
]

TOPIC_MAX = 200
"""The longest topic name."""
_TOPIC = re.compile(rf"[A-Za-z0-9._:-]{{1,{TOPIC_MAX}}}")
_KEY_MAX = 1_000


def check_topic(topic: object, field: str = "topic") -> str:
    """``topic`` if it is a valid topic (or event key) name, else InvalidArgument."""
    if not isinstance(topic, str) or not _TOPIC.fullmatch(topic):
        raise InvalidArgument(
            field,
            f"{topic!r} must be 1-{TOPIC_MAX} characters of letters, digits, '.', '_', ':' or '-'",
        )
    return topic


def check_value(value: object, field: str = "value") -> str:
    """``value`` as JSON text, else InvalidArgument naming ``field``."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(field, f"must be JSON (no NaN or infinity): {exc}") from None


def _check_run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not run_id or "/" in run_id or "\x00" in run_id:
        raise InvalidArgument("run_id", f"{run_id!r} is not a run id")
    return run_id


def _check_send(
    run_id: object, topic: object, value: object, idempotency_key: object
) -> tuple[str, str]:
    """(run id, the value as JSON text), once every argument is checked."""
    run_id = _check_run_id(run_id)
    check_topic(topic)
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= _KEY_MAX
        or "\x00" in idempotency_key
    ):
        raise InvalidArgument(
            "idempotency_key", f"must be 1-{_KEY_MAX} characters without NUL, or None"
        )
    return run_id, check_value(value)


async def send_async(
    aq: AsyncQueueClient,
    run_id: str,
    topic: str,
    value: Any,
    idempotency_key: str | None = None,
) -> None:
    """:func:`send` for async callers (an :class:`AsyncQueueClient`)."""
    run_id, text = _check_send(run_id, topic, value, idempotency_key)
    message = message_item(run_id, topic, text, idempotency_key)
    keys = [meta_key(run_id), result_key(run_id)]
    if idempotency_key is not None and message.dedup_key is not None:
        keys.append(message.dedup_key)
    try:
        found = await aq.lookup(RESULTS_QUEUE, keys)
    except QueueNotFound:
        found = {}
    stored = found.get(meta_key(run_id))
    if stored is None:
        raise RunNotFound(run_id)
    if len(keys) == 3 and keys[2] in found:
        return  # a resend of a message the run already has: a no-op, ended or not
    if result_key(run_id) in found:
        raise RunFinished(run_id)
    meta = RunMeta.model_validate_json(stored.payload)
    tag = f"msg-{uuid.uuid4().hex}"
    wake = wake_item(run_id, tag, trace=meta.trace, workflow=meta.workflow)
    await aq.commit(
        produce={
            RESULTS_QUEUE: [message, mailbox_mark(run_id)],
            meta.queue: [wake],
        },
        silent=(RESULTS_QUEUE,),
        wake=sent_wake(run_id, tag),  # the worker keeping the body reads while it leases
    )


def send(
    q: QueueClient,
    run_id: str,
    topic: str,
    value: Any,
    idempotency_key: str | None = None,
) -> None:
    """Send ``value`` (anything JSON can hold) to run ``run_id`` on ``topic``.

    The message waits in the run's mailbox until a ``recv(topic)`` of the run
    reads it (each message is read once, in send order per topic); a run
    waiting in ``recv`` is woken by this commit. With ``idempotency_key``,
    sending again with the same key (to the same run and topic) is a no-op,
    also once the run has ended, until the run's messages are pruned
    (:data:`~querator.workflows.retention.MESSAGE_RETENTION` after its end):
    then it raises RunFinished as any send to an ended run. Raises
    :class:`~querator.workflows.errors.RunNotFound` for an unknown run,
    :class:`~querator.workflows.errors.RunFinished` for one that has ended and
    :class:`~querator.errors.InvalidArgument` for a bad topic, key or value
    (nothing is written then).
    """
    _check_send(run_id, topic, value, idempotency_key)
    q.call(send_async, q.aio, run_id, topic, value, idempotency_key)


def _check_signal(signal: object) -> tuple[str, str]:
    """(topic, value as JSON text) of a ``signal=(topic, value)`` option."""
    if not isinstance(signal, tuple) or len(signal) != 2:
        raise InvalidArgument("signal", f"must be a (topic, value) pair, got {signal!r}")
    return check_topic(signal[0]), check_value(signal[1])


async def signal_with_start_async(
    aq: AsyncQueueClient,
    fn: WorkflowFunction[..., Any],
    /,
    *args: Any,
    signal: tuple[str, Any],
    idempotency_key: str | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> AsyncRunHandle[Any]:
    """:func:`signal_with_start` for async callers (an :class:`AsyncQueueClient`)."""
    topic, text = _check_signal(signal)
    wf_queue = check_start(fn, idempotency_key, queue, 0.0)

    def message(run_id: str) -> dict[str, list[Any]]:
        return {RESULTS_QUEUE: [message_item(run_id, topic, text, None), mailbox_mark(run_id)]}

    with runs_telemetry.starting(fn.name, wf_queue) as started:
        handle, created = await create_run(
            aq, fn, args, kwargs, idempotency_key, wf_queue, 0.0, started, then=message
        )
    if not created:
        await send_async(aq, handle.run_id, topic, json.loads(text))
    return handle


def signal_with_start(
    q: QueueClient,
    fn: WorkflowFunction[..., Any],
    /,
    *args: Any,
    signal: tuple[str, Any],
    idempotency_key: str | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> RunHandle[Any]:
    """Start a run of ``fn(*args, **kwargs)`` with message ``signal = (topic,
    value)`` already in its mailbox, in one transaction: a callback that
    arrives before the run exists is never lost. With ``idempotency_key``
    naming a run that exists, the message is sent to that run instead
    (:class:`~querator.workflows.errors.RunFinished` if it has ended).
    ``queue``: as :func:`~querator.workflows.start`. A bad topic or a value
    that is not JSON raises :class:`~querator.errors.InvalidArgument` before
    anything is written.
    """
    _check_signal(signal)
    check_start(fn, idempotency_key, queue, 0.0)
    handle = q.call(
        signal_with_start_async,
        q.aio,
        fn,
        *args,
        signal=signal,
        idempotency_key=idempotency_key,
        queue=queue,
        **kwargs,
    )
    return RunHandle(q, handle.run_id, fn)


def _check_recv(topic: object, timeout: object) -> float | None:
    check_topic(topic)
    if timeout is None:
        return None
    return check_duration("timeout", timeout, allow_zero=True)


def recv(topic: str, timeout: float | None = None) -> Any:
    """Inside a workflow body: the oldest unread message sent to this run on
    ``topic``, waiting for one up to ``timeout`` seconds (None: for ever);
    None when the timeout comes first.

    The run holds no worker while it waits: its body is parked and woken by the
    commit of a :func:`send`, or by a timer at the timeout (counted from the
    first time the body reached this call). The message read is stored in the
    run's history with the read, so a replay reads the same one here.
    """
    seconds = _check_recv(topic, timeout)
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("recv() is called inside a workflow body only")
    return recv_value(ctx.recv(topic, seconds))[1]


async def recv_async(topic: str, timeout: float | None = None) -> Any:
    """:func:`recv` for async workflow bodies (``await recv_async("approval")``)."""
    _check_recv(topic, timeout)
    if CURRENT.get() is None:
        raise UsageError("recv_async() is called inside a workflow body only")
    return recv(topic, timeout)


def set_event(key: str, value: Any) -> None:
    """Inside a workflow body: publish ``value`` (anything JSON holds) under
    ``key``, for :func:`get_event` to read; the latest value wins.

    The value is stored with the run's next commit (when the body next waits
    for something or ends), once: a replay finds it stored and writes nothing.
    """
    check_topic(key, "key")
    text = check_value(value)
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("set_event() is called inside a workflow body only")
    ctx.set_event(key, text)


async def set_event_async(key: str, value: Any) -> None:
    """:func:`set_event` for async workflow bodies."""
    set_event(key, value)


async def _latest(aq: AsyncQueueClient, run_id: str, key: str) -> tuple[bool, Any]:
    """(found, value) of the latest value ``run_id`` published under ``key``."""
    prefix, after, last = event_prefix(run_id, key), None, None
    while True:
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=after, limit=1000)
        if page:
            last = page[-1]
        if len(page) < 1000:
            break
        after = page[-1].dedup_key
    if last is None:
        return False, None
    return True, _event_value(last.payload)


def _event_value(payload: bytes) -> Any:
    """The value an event item holds (its record's JSON result)."""
    record = StepRecord.model_validate_json(payload)
    return json.loads(record.result or "null")


async def get_event_async(aq: AsyncQueueClient, run_id: str, key: str, timeout: float = 0.0) -> Any:
    """:func:`get_event` for async callers (an :class:`AsyncQueueClient`)."""
    run_id = _check_run_id(run_id)
    check_topic(key, "key")
    timeout = check_duration("timeout", timeout, allow_zero=True)
    deadline = anyio.current_time() + timeout
    watch = aq.watch(RESULTS_QUEUE)
    checked = False
    while True:
        try:
            found, value = await _latest(aq, run_id, key)
        except QueueNotFound:
            raise RunNotFound(run_id) from None
        if found:
            return value
        if not checked:
            stored = await aq.lookup(RESULTS_QUEUE, [meta_key(run_id)])
            if meta_key(run_id) not in stored:
                raise RunNotFound(run_id)
            checked = True
        left = deadline - anyio.current_time()
        if left <= 0:
            return None
        await watch.wait(min(left, _WAIT_SLICE))


_WAIT_SLICE = 5.0
"""The longest a waiting get_event sleeps before it looks again."""


def get_event(q: QueueClient, run_id: str, key: str, timeout: float = 0.0) -> Any:
    """The latest value run ``run_id`` published under ``key`` (:func:`set_event`).

    With no value yet, waits up to ``timeout`` seconds for the first one
    (woken by the commit that stores it, not by polling) and returns None if
    none comes. Raises :class:`~querator.workflows.errors.RunNotFound` for an
    unknown run and :class:`~querator.errors.InvalidArgument` for a bad key or
    timeout.
    """
    _check_run_id(run_id)
    check_topic(key, "key")
    check_duration("timeout", timeout, allow_zero=True)
    return q.call(get_event_async, q.aio, run_id, key, timeout)
