"""How a run is laid out in queue items: its queues, item kinds and record keys.

- results queue (``querator.results``, never leased): permanent records keyed
  by ``dedup_key``: ``{run}/meta``, ``{run}/{position}`` (one per step call),
  ``{run}/result``.
- workflow queue: wake tasks (kind ``querator.wake``) — "replay this run".
- step queue: step items (kind ``querator.step``), ``dedup_key``
  ``{run}/{position}/step`` (``{run}/{position}/step/d{n}`` after the n-th deferral).
- results queue: ``{run}/cancel`` once cancellation was asked for.
- results queue: ``{run}/child/{position:012d}``: a link to the child run started
  at ``position`` (its id, workflow, queue and parent-close policy).
- results queue: ``{run}/{position}/wait``: what the body parked at
  ``position`` waits for (``recv``, ``wait_for_event``, a child run).
- results queue: ``{run}/{position}/progress/a`` and ``/b``: a step's last
  progress report (the newer of the two; reports alternate between them).
- results queue: ``{run}/resume``: a resume request, until a worker carries it out.
- results queue: ``{run}/stream/{key}/{position}`` (a body's ``write_stream`` or
  ``close_stream``), ``.../{position}/{seq}`` (a step's); a close mark's
  record has no result.
- events queue (``querator.events``, never leased): ``{name}``, the first
  ``emit_event`` of a name, kept for :data:`EVENT_RETENTION` (the queue's
  ``expire_timeout``); results queue: ``events/{name}/waiting/{run}/{position}``,
  a run parked in ``wait_for_event(name)`` (whom an emit wakes).
- results queue: ``{run}/msg/{topic}/{id}``: a message sent to the run
  (:mod:`querator.workflows.engine.mailbox`); ``mailboxes/{run}``: the run has
  messages (written with each send; the maintenance sweep prunes a finished
  run's messages through these marks, see :mod:`querator.workflows.retention`).
- results queue: ``{run}/attrs/{999999 - gen}``: the run's search attributes
  after its ``gen``-th ``set_attributes`` (:mod:`querator.workflows.attributes`).
- results queue: ``index/...``: the run index's entries (empty payloads), see
  :mod:`querator.workflows.run_index`.
- sagas, results queue: ``{run}/compensating`` (reason and plan), ``{run}/c{k}``
  (compensation records, ``{run}/c{k}/r{round}`` after re-drives),
  ``{run}/cfailed/{g}``, ``{run}/redrive/{g}``, ``{run}/aborted``; compensation
  items are step items keyed ``{run}/c{k}[/r{round}]/step``.

The models stored under these keys, and the items that carry them, are in
:mod:`querator.workflows.stored`.
"""

from __future__ import annotations

import hashlib
import re
import uuid

from querator.queue.models import QueueSettings
from querator.queue.validation import MAX_DURATION

RESULTS_QUEUE = "querator.results"
"""Where run records live."""
WORKFLOW_QUEUE = "querator.workflows"
"""Default queue of wake tasks (and of steps without a queue of their own)."""
WAKE_KIND = "querator.wake"
"""Kind of wake tasks: ``querator.wake:{workflow}`` (see :func:`wake_kind`); bare,
the kind of wake tasks written before routing (see
:mod:`querator.workflows.engine.rerouting`)."""
STEP_KIND = "querator.step"
"""Kind of step items: ``querator.step:{step}`` (see :func:`step_kind`); bare, the
kind of step items written before routing."""
RECORD_KIND = "querator.record"
PROGRESS_WAKE = "querator.progress"
"""The wakeup name a worker sends after its runs moved (at most twice a second:
:mod:`querator.workflows.engine.beacon`); live run pages watch it."""
ENCODING = "json"
SLEEP_STEP = "querator.sleep"
"""The step name stored in the record of a durable timer."""
SET_EVENT_STEP = "querator.set_event"
"""The step name stored in the record of a ``set_event`` (the value published)."""
RECV_STEP = "querator.recv"
"""The step name stored in the record of a ``recv`` (the message read, or its timeout)."""
SET_ATTRIBUTES_STEP = "querator.set_attributes"
"""The step name stored in the record of a ``set_attributes`` (the run's attributes
after it, as a snapshot: :mod:`querator.workflows.attributes`)."""
WRITE_STREAM_STEP = "querator.write_stream"
"""The step name stored in the record of a ``write_stream``/``close_stream`` in a body."""
PATCH_STEP = "querator.patch"
"""The step name stored in a patch marker (``patched`` returned True there; the
patch's name is the record's result)."""
WAIT_EVENT_STEP = "querator.wait_for_event"
"""The step name stored in the record of a ``wait_for_event`` (the event seen, or its timeout)."""
EVENTS_QUEUE = "querator.events"
"""Where the events emitted by name live (one item per name: the first emit)."""
EVENT_RETENTION = 86_400.0 * 7
"""Seconds an emitted event is kept (seen by runs that start waiting later): the
events queue's ``expire_timeout``; past it the queue's maintenance deletes the
event, waits no longer see it and the name can be emitted anew."""
EVENTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=EVENT_RETENTION)
"""Settings of :data:`EVENTS_QUEUE` when querator creates it (an existing queue
keeps its own: ``update_queue`` changes the retention of events emitted later)."""
RESULTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
"""Records are kept for the longest time a queue allows (366 days)."""
WORK_LEASE = 10.0
"""Seconds a worker holds a wake task or step item without renewing it, in the
queues querator creates: a step is renewed every third of it while it runs,
so a worker that dies is replaced within about this long (the failover time)."""
DEAD_QUEUE = "querator.dead"
"""Where items of the workflow and step queues querator creates go when they
cannot be handled (undecodable, unknown kind, a run with no meta): kept for a
user to see (``querator dead list QUEUE``) and re-drive, never dropped."""
DEAD_SETTINGS = QueueSettings()
"""Settings of :data:`DEAD_QUEUE`: the default expiry, so its dead letters are
kept until requeued or purged (a dead queue with the default ``expire_timeout``
never expires its items)."""
WORK_SETTINGS = QueueSettings(
    lease_timeout=WORK_LEASE, expire_timeout=MAX_DURATION, dead_queue=DEAD_QUEUE
)
"""Settings of workflow and step queues created by querator (existing ones are kept)."""
RESUME_TAG = "resume"
"""The tag of the wake task a resume request comes with (``{run}/wake/resume``)."""


def resume_key(run_id: str) -> str:
    return f"{run_id}/resume"


def new_run_id(idempotency_key: str | None) -> str:
    """A fresh run id, or the one derived from ``idempotency_key``."""
    if idempotency_key is None:
        return f"run-{uuid.uuid4().hex}"
    return "run-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def child_run_id(parent: str, position: int) -> str:
    """The run id of the child workflow started at ``position`` of run ``parent``."""
    return "run-" + hashlib.sha256(f"child:{parent}/{position}".encode()).hexdigest()[:32]


def cancel_key(run_id: str) -> str:
    return f"{run_id}/cancel"


def children_prefix(run_id: str) -> str:
    """The key prefix of the links to the child runs ``run_id`` started."""
    return f"{run_id}/child/"


def child_key(run_id: str, position: int) -> str:
    """The link to the child run started at ``position`` of ``run_id`` (keys sort
    in position order)."""
    return f"{children_prefix(run_id)}{position:012d}"


def event_prefix(run_id: str, key: str) -> str:
    """The key prefix of the values run ``run_id`` published under ``key``."""
    return f"{run_id}/event/{key}/"


def event_key(run_id: str, key: str, position: int) -> str:
    """The value run ``run_id`` published under ``key`` at ``position`` (keys
    sort in position order: the last is the latest)."""
    return f"{event_prefix(run_id, key)}{position:012d}"


def stream_prefix(run_id: str, key: str) -> str:
    """The key prefix of stream ``key`` of run ``run_id`` (its values and its close mark)."""
    return f"{run_id}/stream/{key}/"


def stream_key(run_id: str, key: str, position: int, seq: int | None = None) -> str:
    """A value of stream ``key``: written by the body at ``position``, or the
    ``seq``-th written by the step called at ``position`` (keys sort in stream order)."""
    head = f"{stream_prefix(run_id, key)}{position:012d}"
    return head if seq is None else f"{head}/{seq:09d}"


def named_event_key(name: str) -> str:
    """The key of the event emitted under ``name`` (in :data:`EVENTS_QUEUE`)."""
    return name


def event_waiters_prefix(name: str) -> str:
    """The key prefix of the runs parked in ``wait_for_event(name)``."""
    return f"events/{name}/waiting/"


def event_waiter_key(name: str, run_id: str, position: int) -> str:
    """Run ``run_id`` waits for event ``name`` at ``position``."""
    return f"{event_waiters_prefix(name)}{run_id}/{position:012d}"


MAILBOXES_PREFIX = "mailboxes/"
"""The key prefix of the marks of the runs that have messages."""


def mailbox_mark_key(run_id: str) -> str:
    """The mark saying run ``run_id`` has messages (its mailbox may need pruning)."""
    return f"{MAILBOXES_PREFIX}{run_id}"


def meta_key(run_id: str) -> str:
    return f"{run_id}/meta"


def step_key(run_id: str, position: int) -> str:
    return f"{run_id}/{position}"


def wait_key(run_id: str, position: int) -> str:
    """What the body parked at ``position`` waits for (a message, an event, a
    child run): written with its first park, for ``get_run`` to show."""
    return f"{run_id}/{position}/wait"


def attempt_key(record_key: str, attempt: int) -> str:
    """The record of failed attempt ``attempt`` of the step call (or compensation)
    whose own record is ``record_key``."""
    return f"{record_key}/attempt/{attempt}"


PROGRESS_SLOTS = ("a", "b")
"""A step's progress alternates between two records, so a reader always finds one."""


def progress_key(run_id: str, position: int, slot: str) -> str:
    return f"{run_id}/{position}/progress/{slot}"


_UNAWAITED_RECORD = re.compile(r"[^/]+/\d+(/progress/[ab]|/attempt/\d+|/wait)?")
"""Keys of a step call's record, its progress, its failed attempts and a wait's:
nobody waits for those."""


def awaited_record(key: str) -> bool:
    """Whether a ``result()`` call may be waiting for the record ``key``: every
    record but a step call's own, its progress and an event waiter's (a run's result, a saga's
    compensation records, cancel requests, ...), so writing it wakes the
    results queue's watchers."""
    return _UNAWAITED_RECORD.fullmatch(key) is None and not key.startswith("events/")


def result_key(run_id: str) -> str:
    return f"{run_id}/result"


def aborted_key(run_id: str) -> str:
    """A saga being aborted (timeout) waits for its running steps: new attempts are skipped."""
    return f"{run_id}/aborted"


def compensating_key(run_id: str) -> str:
    return f"{run_id}/compensating"


def compensation_slot(index: int, round_: int) -> str:
    """Record key suffix of compensation ``index`` at re-drive ``round_``."""
    return f"c{index}" if round_ == 0 else f"c{index}/r{round_}"


def cfailed_key(run_id: str, g: int) -> str:
    return f"{run_id}/cfailed/{g}"


def redrive_key(run_id: str, g: int) -> str:
    return f"{run_id}/redrive/{g}"


def wake_kind(workflow: str) -> str:
    """The kind of the wake tasks of ``workflow``'s runs (bare when not known)."""
    return _routed(WAKE_KIND, workflow) if workflow else WAKE_KIND


def step_kind(step: str) -> str:
    """The kind of the items that run step (or compensation) ``step``."""
    return _routed(STEP_KIND, step)


def _routed(prefix: str, name: str) -> str:
    """``{prefix}:{name}``; a name too long for a kind (512 characters) is
    replaced by its SHA-256 (``{prefix}:#{hex}``), the same in every process."""
    kind = f"{prefix}:{name}"
    if len(kind) <= 512:
        return kind
    return f"{prefix}:#{hashlib.sha256(name.encode()).hexdigest()}"


def is_wake(kind: str) -> bool:
    """Whether ``kind`` is a wake task's (routed or bare)."""
    return kind.startswith(WAKE_KIND) and kind[len(WAKE_KIND) : len(WAKE_KIND) + 1] in ("", ":")


def is_step(kind: str) -> bool:
    """Whether ``kind`` is a step item's (routed or bare)."""
    return kind.startswith(STEP_KIND) and kind[len(STEP_KIND) : len(STEP_KIND) + 1] in ("", ":")


def routed_name(kind: str) -> str | None:
    """The workflow or step name a routed kind carries (None: a bare kind)."""
    _, colon, name = kind.partition(":")
    return name if colon else None
