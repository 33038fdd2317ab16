"""The table of RPC endpoints: path, body, answer, scope and size cap of each.

The server dispatches from it and the OpenAPI document is generated from it,
so neither can drift from the other. Caps follow Querator's server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel

from querator.http.handlers import admin, limits, locks, messages, queue, tasks, webhooks, workflows
from querator.http.protocol import QUERATOR_CALLS
from querator.http.rpc import KB, MB, Endpoint
from querator.http.wire import admin as wa
from querator.http.wire import limits as wr
from querator.http.wire import locks as wl
from querator.http.wire import messages as wm
from querator.http.wire import queue as wq
from querator.http.wire import tasks as wt
from querator.http.wire import webhooks as wh
from querator.http.wire import workflows as ww
from querator.webhooks import Endpoint as HookEndpoint
from querator.webhooks import Message
from querator.workflows.checking import ReplayCheck
from querator.workflows.inspection import RunInfo

B = TypeVar("B", bound=BaseModel)
R = TypeVar("R")

READ, WRITE, ADMIN = "read", "write", "admin"
"""Token scopes: read < write < admin (a scope includes those before it)."""


def on_queue(fn: Callable[[Any, B], Awaitable[R]]) -> Callable[[Any, B], Awaitable[R]]:
    """A handler of the queue client, called with the server's state."""

    async def handler(state: Any, body: B) -> R:
        return await fn(state.aq, body)

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


_QUEUE_ENDPOINTS = [
    Endpoint("/v1/queue.produce", wq.ProduceRequest, wq.ProduceReply,
             on_queue(queue.produce), WRITE, 5 * MB, "Produce items"),
    Endpoint("/v1/queue.lease", wq.LeaseRequest, wq.LeaseReply,
             queue.lease, WRITE, 256 * KB, "Lease items (long poll)"),
    Endpoint("/v1/queue.complete", wq.CompleteRequest, wq.Reply,
             on_queue(queue.complete), WRITE, 256 * KB, "Complete leased items"),
    Endpoint("/v1/queue.retry", wq.RetryRequest, wq.Reply,
             on_queue(queue.retry), WRITE, 256 * KB, "Retry leased items"),
    Endpoint("/v1/queue.renew", wq.RenewRequest, wq.RenewReply,
             on_queue(queue.renew), WRITE, 256 * KB, "Renew leases"),
    Endpoint("/v1/queue.transact", wq.TransactRequest, wq.TransactReply,
             on_queue(queue.transact), WRITE, 5 * MB, "Atomic transaction"),
    Endpoint("/v1/queue.stats", wq.QueueRequest, wq.StatsReply,
             on_queue(queue.stats), READ, 512, "Queue statistics"),
    Endpoint("/v1/queue.gauges", wq.GaugesRequest, wq.GaugesReply,
             on_queue(queue.gauges), READ, 512, "Bounded queue counts for metrics"),
    Endpoint("/v1/queue.clear", wq.ClearRequest, wq.ClearReply,
             on_queue(queue.clear), ADMIN, 512, "Clear a queue"),
    Endpoint("/v1/queue.lookup", wq.LookupRequest, wq.LookupReply,
             on_queue(queue.lookup), READ, 256 * KB, "Items by dedup key"),
    Endpoint("/v1/queue.scan_keys", wq.ScanKeysRequest, wq.ScanKeysReply,
             on_queue(queue.scan_keys), READ, 4 * KB, "Items by dedup-key prefix"),
    Endpoint("/v1/queues.create", wa.QueueInfo, wa.CreateReply,
             on_queue(admin.create), ADMIN, 256 * KB, "Create a queue"),
    Endpoint("/v1/queues.update", wa.QueueInfo, wa.CreateReply,
             on_queue(admin.update), ADMIN, 512 * KB, "Update a queue"),
    Endpoint("/v1/queues.list", wa.ListRequest, wa.ListReply,
             on_queue(admin.list_queues), READ, 256 * KB, "List queues"),
    Endpoint("/v1/queues.info", wq.QueueRequest, wa.QueueInfo,
             on_queue(admin.info), READ, 256 * KB, "A queue's settings"),
    Endpoint("/v1/queues.pause", wq.QueueRequest, wa.QueueInfo,
             on_queue(admin.pause), WRITE, 4 * KB, "Pause a queue (its items wait)"),
    Endpoint("/v1/queues.resume", wq.QueueRequest, wa.QueueInfo,
             on_queue(admin.resume), WRITE, 4 * KB, "Resume a paused queue"),
    Endpoint("/v1/queues.delete", wa.DeleteRequest, wq.Reply,
             on_queue(admin.delete), ADMIN, 256 * KB, "Delete a queue"),
    Endpoint("/v1/queues.maintain", wq.Empty, wa.MaintenanceReply,
             on_queue(admin.maintain), ADMIN, 512, "Dead-letter due items now"),
    Endpoint("/v1/storage/items.list", wa.ItemsListRequest, wa.ItemsListReply,
             on_queue(admin.list_items), READ, 256 * KB, "List stored items"),
    Endpoint("/v1/storage/items.import", wa.ImportRequest, wa.ItemsListReply,
             on_queue(admin.import_items), ADMIN, 64 * MB, "Import items"),
    Endpoint("/v1/storage/items.delete", wa.ItemsDeleteRequest, wq.Reply,
             on_queue(admin.delete_items), ADMIN, 256 * KB, "Delete items"),
    Endpoint("/v1/storage/scheduled.list", wa.ItemsListRequest, wa.ItemsListReply,
             on_queue(admin.list_scheduled), READ, 256 * KB, "List scheduled items"),
]  # fmt: skip
QUEUE_ENDPOINTS = [replace(e, messages=QUERATOR_CALLS.get(e.path)) for e in _QUEUE_ENDPOINTS]
"""Querator's queue API (also in protobuf), plus renew, transact, lookup,
scan_keys, gauges, maintain, pause and resume (querator's own, JSON only)."""

WORKFLOW_ENDPOINTS = [
    Endpoint("/v1/workflows.start", ww.StartRequest, ww.RunReply,
             workflows.start, WRITE, 1 * MB, "Start a workflow run by name"),
    Endpoint("/v1/runs.get", ww.RunRequest, RunInfo,
             workflows.get_run, READ, 4 * KB, "A run with its steps"),
    Endpoint("/v1/runs.list", ww.ListRunsRequest, ww.ListRunsReply,
             workflows.list_runs, READ, 4 * KB, "List runs"),
    Endpoint("/v1/runs.cancel", ww.CancelRequest, ww.DoneReply,
             workflows.cancel, WRITE, 16 * KB, "Cancel a run"),
    Endpoint("/v1/runs.retry_compensation", ww.RunRequest, ww.DoneReply,
             workflows.retry_compensation, WRITE, 4 * KB, "Re-drive a failed compensation"),
    Endpoint("/v1/runs.resume", ww.RunRequest, ww.DoneReply,
             workflows.resume_run, WRITE, 4 * KB, "Resume a failed or cancelled run"),
    Endpoint("/v1/runs.fork", ww.ForkRequest, ww.RunReply,
             workflows.fork_run, WRITE, 4 * KB, "Fork a run from a step"),
    Endpoint("/v1/runs.purge", ww.PurgeRunsRequest, ww.CountReply,
             workflows.purge_runs, ADMIN, 4 * KB, "Delete finished runs that ended before a time"),
    Endpoint("/v1/runs.reindex", wq.Empty, ww.CountReply,
             workflows.reindex_runs, ADMIN, 512, "Index the runs stored without index entries"),
    Endpoint("/v1/runs.replay", ww.RunRequest, ReplayCheck,
             workflows.check_replay, READ, 4 * KB, "Replay a run with the server's workflow code"),
    Endpoint("/v1/runs.result", ww.ResultRequest, ww.ResultReply,
             workflows.result, READ, 4 * KB, "Wait for a run's result (long poll)"),
    Endpoint("/v1/schedules.list", wq.Empty, ww.SchedulesReply,
             workflows.schedules, READ, 512, "List schedules"),
    Endpoint("/v1/schedules.create", ww.ScheduleRequest, wq.Reply,
             workflows.create_schedule, ADMIN, 1 * MB, "Create or redefine a schedule"),
    Endpoint("/v1/schedules.pause", ww.PauseRequest, wq.Reply,
             workflows.pause, ADMIN, 16 * KB, "Pause a schedule"),
    Endpoint("/v1/schedules.resume", ww.ScheduleNameRequest, wq.Reply,
             workflows.resume, ADMIN, 4 * KB, "Resume a schedule"),
    Endpoint("/v1/schedules.delete", ww.ScheduleNameRequest, ww.DoneReply,
             workflows.delete_schedule, ADMIN, 4 * KB, "Delete a schedule"),
    Endpoint("/v1/schedules.trigger", ww.ScheduleNameRequest, ww.RunReply,
             workflows.trigger, WRITE, 4 * KB, "Start a schedule's run now"),
    Endpoint("/v1/dead.list", ww.DeadListRequest, ww.DeadListReply,
             workflows.dead_list, READ, 4 * KB, "List a queue's dead letters"),
    Endpoint("/v1/dead.requeue", ww.DeadRequeueRequest, ww.CountReply,
             workflows.dead_requeue, ADMIN, 256 * KB, "Send dead letters back"),
    Endpoint("/v1/dead.show", ww.DeadShowRequest, ww.DeadLetter,
             workflows.dead_show, READ, 4 * KB, "One dead letter in full"),
    Endpoint("/v1/dead.purge", ww.DeadPurgeRequest, ww.CountReply,
             workflows.dead_purge, ADMIN, 256 * KB, "Delete dead letters for good"),
]  # fmt: skip
"""Workflows, schedules and dead letters (querator's own)."""

LOCK_ENDPOINTS = [
    Endpoint("/v1/locks.create", wl.CreateRequest, wq.Reply,
             on_queue(locks.create), WRITE, 4 * KB, "Create a semaphore or change its limit"),
    Endpoint("/v1/locks.acquire", wl.AcquireRequest, wl.PermitReply,
             locks.acquire, WRITE, 4 * KB, "Take a permit of a lock or semaphore (long poll)"),
    Endpoint("/v1/locks.renew", wl.HeldRequest, wl.PermitReply,
             on_queue(locks.renew), WRITE, 4 * KB, "Extend a held permit's lease"),
    Endpoint("/v1/locks.release", wl.HeldRequest, wq.Reply,
             on_queue(locks.release), WRITE, 4 * KB, "Give a held permit back"),
    Endpoint("/v1/locks.list", wq.Empty, wl.SemaphoresReply,
             on_queue(locks.list_locks), READ, 512, "Semaphores with their holders"),
]  # fmt: skip
"""Locks and semaphores (querator's own)."""

LIMIT_ENDPOINTS = [
    Endpoint("/v1/limits.create", wr.CreateRateRequest, wq.Reply,
             limits.create, WRITE, 4 * KB, "Create a rate limit"),
    Endpoint("/v1/limits.acquire", wr.RateRequest, wr.RateReply,
             limits.acquire, WRITE, 4 * KB, "Count a start under a rate limit (long poll)"),
]  # fmt: skip
"""Rate limits (querator's own)."""

TASK_ENDPOINTS = [
    Endpoint("/v1/tasks.defer", wt.DeferRequest, wt.DeferReply,
             on_queue(tasks.defer), WRITE, 1 * MB, "Defer a task by name"),
    Endpoint("/v1/tasks.list", wt.ListTasksRequest, wt.ListTasksReply,
             on_queue(tasks.list_tasks), READ, 4 * KB, "List waiting, running or failed tasks"),
    Endpoint("/v1/tasks.status", wt.TaskStatusRequest, wt.TaskStatusReply,
             on_queue(tasks.status), READ, 4 * KB, "A task's kept outcome"),
    Endpoint("/v1/tasks.cancel", wt.CancelTaskRequest, wt.CancelTaskReply,
             on_queue(tasks.cancel), WRITE, 4 * KB, "Remove a task no worker has started"),
    Endpoint("/v1/tasks.retry", wt.RetryTasksRequest, wt.RetryTasksReply,
             on_queue(tasks.retry), ADMIN, 256 * KB, "Send failed tasks back"),
]  # fmt: skip
"""Background tasks (querator's own)."""

WEBHOOK_ENDPOINTS = [
    Endpoint("/v1/webhooks/endpoints.add", wh.AddEndpointRequest, HookEndpoint,
             webhooks.add_endpoint, ADMIN, 64 * KB, "Add a webhook endpoint"),
    Endpoint("/v1/webhooks/endpoints.get", wh.EndpointRequest, HookEndpoint,
             webhooks.get_endpoint, ADMIN, 4 * KB, "A webhook endpoint, with its secrets"),
    Endpoint("/v1/webhooks/endpoints.list", wq.Empty, wh.EndpointsReply,
             webhooks.list_endpoints, ADMIN, 512, "Every webhook endpoint, with its secrets"),
    Endpoint("/v1/webhooks/endpoints.update", wh.UpdateEndpointRequest, HookEndpoint,
             webhooks.update_endpoint, ADMIN, 64 * KB, "Change a webhook endpoint's options"),
    Endpoint("/v1/webhooks/endpoints.disable", wh.DisableEndpointRequest, HookEndpoint,
             webhooks.disable_endpoint, ADMIN, 16 * KB, "Stop delivering to an endpoint"),
    Endpoint("/v1/webhooks/endpoints.enable", wh.EndpointRequest, HookEndpoint,
             webhooks.enable_endpoint, ADMIN, 4 * KB, "Deliver to an endpoint again"),
    Endpoint("/v1/webhooks/endpoints.rotate_secret", wh.RotateSecretRequest, HookEndpoint,
             webhooks.rotate_secret, ADMIN, 4 * KB, "Give an endpoint a new secret"),
    Endpoint("/v1/webhooks/endpoints.delete", wh.EndpointRequest, wq.Reply,
             webhooks.delete_endpoint, ADMIN, 4 * KB, "Delete a webhook endpoint"),
    Endpoint("/v1/webhooks/messages.send", wh.SendRequest, Message,
             webhooks.send, WRITE, 16 * MB, "Send a webhook message"),
    Endpoint("/v1/webhooks/messages.get", wh.MessageRequest, Message,
             webhooks.get_message, READ, 4 * KB, "A sent message"),
    Endpoint("/v1/webhooks/attempts.list", wh.AttemptsRequest, wh.AttemptsReply,
             webhooks.attempts, READ, 4 * KB, "The attempts log of a message or endpoint"),
    Endpoint("/v1/webhooks/failed.list", wh.FailedRequest, wh.FailedReply,
             webhooks.failed, READ, 4 * KB, "Failed deliveries waiting to be re-driven"),
    Endpoint("/v1/webhooks/failed.redrive", wh.RedriveRequest, ww.CountReply,
             webhooks.redrive, ADMIN, 4 * KB, "Deliver failed deliveries again"),
]  # fmt: skip
"""Webhook endpoints, messages, attempts and re-drives (querator's own).
Reading endpoints needs an admin token: their records carry the secrets."""

MESSAGE_ENDPOINTS = [
    Endpoint("/v1/runs.send", wm.SendRequest, wq.Reply,
             messages.send, WRITE, 1 * MB, "Send a message to a run"),
    Endpoint("/v1/events.emit", wm.EmitRequest, wm.EmitReply,
             messages.emit, WRITE, 1 * MB, "Emit an event by name (wakes the runs waiting for it)"),
    Endpoint("/v1/runs.get_event", wm.GetEventRequest, wm.EventReply,
             messages.get_event, READ, 4 * KB, "A run's published value (long poll)"),
    Endpoint("/v1/runs.read_stream", wm.ReadStreamRequest, wm.StreamReply,
             messages.read_stream, READ, 4 * KB, "A run's stream from an offset (long poll)"),
]  # fmt: skip
"""Talking to a run: messages, events by name, published state and streams
(querator's own)."""

ENDPOINTS = [
    *QUEUE_ENDPOINTS,
    *WORKFLOW_ENDPOINTS,
    *MESSAGE_ENDPOINTS,
    *LOCK_ENDPOINTS,
    *LIMIT_ENDPOINTS,
    *TASK_ENDPOINTS,
    *WEBHOOK_ENDPOINTS,
]
"""Every RPC the server answers."""
