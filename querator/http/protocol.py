"""Querator's calls and their protobuf messages (the ``.proto`` files in
:mod:`querator.http.proto`): the server answers these calls in protobuf too,
and the client sends them in protobuf when asked to."""

from __future__ import annotations

from querator.http.encoding import Messages
from querator.http.proto import queue_pb2 as pq
from querator.http.proto import queues_pb2 as pqs
from querator.http.proto import storage_pb2 as ps
from querator.http.proto.reply_pb2 import Reply

QUERATOR_CALLS = {
    "/v1/queue.produce": Messages(pq.QueueProduceRequest, pq.QueueProduceResponse),
    "/v1/queue.lease": Messages(pq.QueueLeaseRequest, pq.QueueLeaseResponse),
    "/v1/queue.complete": Messages(pq.QueueCompleteRequest, Reply),
    "/v1/queue.retry": Messages(pq.QueueRetryRequest, Reply),
    "/v1/queue.stats": Messages(pq.QueueStatsRequest, pq.QueueStatsResponse),
    "/v1/queue.clear": Messages(pq.QueueClearRequest, pq.QueueClearResponse),
    "/v1/queues.create": Messages(pq.QueueInfo, pqs.QueuesCreateResponse),
    "/v1/queues.update": Messages(pq.QueueInfo, pqs.QueuesCreateResponse),
    "/v1/queues.list": Messages(pqs.QueuesListRequest, pqs.QueuesListResponse),
    "/v1/queues.info": Messages(pqs.QueuesInfoRequest, pq.QueueInfo),
    "/v1/queues.delete": Messages(pqs.QueuesDeleteRequest, Reply),
    "/v1/storage/items.list": Messages(ps.StorageItemsListRequest, ps.StorageItemsListResponse),
    "/v1/storage/items.import": Messages(
        ps.StorageItemsImportRequest, ps.StorageItemsImportResponse
    ),
    "/v1/storage/items.delete": Messages(ps.StorageItemsDeleteRequest, Reply),
    "/v1/storage/scheduled.list": Messages(ps.StorageItemsListRequest, ps.StorageItemsListResponse),
}
"""Path -> request and reply messages, for every call of Querator's protocol
that querator serves (Querator's ``queue.reload``, ``queues.rebalance``,
``storage/scheduled.add`` and its namespace, user and role calls are not served)."""
