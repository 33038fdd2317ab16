import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueueProduceRequest(_message.Message):
    __slots__ = ("queueName", "requestTimeout", "items")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    REQUESTTIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    requestTimeout: str
    items: _containers.RepeatedCompositeFieldContainer[QueueProduceItem]
    def __init__(self, queueName: _Optional[str] = ..., requestTimeout: _Optional[str] = ..., items: _Optional[_Iterable[_Union[QueueProduceItem, _Mapping]]] = ...) -> None: ...

class QueueProduceItem(_message.Message):
    __slots__ = ("encoding", "kind", "reference", "enqueueAt", "bytes", "utf8", "headers", "dedupKey", "partitionKey", "priority")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    ENQUEUEAT_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    UTF8_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    DEDUPKEY_FIELD_NUMBER: _ClassVar[int]
    PARTITIONKEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    kind: str
    reference: str
    enqueueAt: _timestamp_pb2.Timestamp
    bytes: bytes
    utf8: str
    headers: _containers.ScalarMap[str, str]
    dedupKey: str
    partitionKey: str
    priority: int
    def __init__(self, encoding: _Optional[str] = ..., kind: _Optional[str] = ..., reference: _Optional[str] = ..., enqueueAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., bytes: _Optional[bytes] = ..., utf8: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., dedupKey: _Optional[str] = ..., partitionKey: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class QueueProduceResponse(_message.Message):
    __slots__ = ("code", "codeText", "message", "details", "ids")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    CODETEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    code: int
    codeText: str
    message: str
    details: _containers.ScalarMap[str, str]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, code: _Optional[int] = ..., codeText: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueLeaseRequest(_message.Message):
    __slots__ = ("queueName", "batchSize", "clientId", "requestTimeout", "kinds", "complete")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    BATCHSIZE_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    REQUESTTIMEOUT_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    batchSize: int
    clientId: str
    requestTimeout: str
    kinds: _containers.RepeatedScalarFieldContainer[str]
    complete: _containers.RepeatedCompositeFieldContainer[ItemRef]
    def __init__(self, queueName: _Optional[str] = ..., batchSize: _Optional[int] = ..., clientId: _Optional[str] = ..., requestTimeout: _Optional[str] = ..., kinds: _Optional[_Iterable[str]] = ..., complete: _Optional[_Iterable[_Union[ItemRef, _Mapping]]] = ...) -> None: ...

class QueueLeaseItem(_message.Message):
    __slots__ = ("encoding", "kind", "reference", "id", "attempts", "leaseDeadline", "bytes", "version", "queue", "partition", "clientId", "availableAt", "expireDeadline", "createdAt", "headers", "dedupKey", "sourceId", "priority")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LEASEDEADLINE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    AVAILABLEAT_FIELD_NUMBER: _ClassVar[int]
    EXPIREDEADLINE_FIELD_NUMBER: _ClassVar[int]
    CREATEDAT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    DEDUPKEY_FIELD_NUMBER: _ClassVar[int]
    SOURCEID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    kind: str
    reference: str
    id: str
    attempts: int
    leaseDeadline: _timestamp_pb2.Timestamp
    bytes: bytes
    version: int
    queue: str
    partition: int
    clientId: str
    availableAt: _timestamp_pb2.Timestamp
    expireDeadline: _timestamp_pb2.Timestamp
    createdAt: _timestamp_pb2.Timestamp
    headers: _containers.ScalarMap[str, str]
    dedupKey: str
    sourceId: str
    priority: int
    def __init__(self, encoding: _Optional[str] = ..., kind: _Optional[str] = ..., reference: _Optional[str] = ..., id: _Optional[str] = ..., attempts: _Optional[int] = ..., leaseDeadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., bytes: _Optional[bytes] = ..., version: _Optional[int] = ..., queue: _Optional[str] = ..., partition: _Optional[int] = ..., clientId: _Optional[str] = ..., availableAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expireDeadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., createdAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., headers: _Optional[_Mapping[str, str]] = ..., dedupKey: _Optional[str] = ..., sourceId: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class QueueLeaseResponse(_message.Message):
    __slots__ = ("queueName", "partition", "items")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    items: _containers.RepeatedCompositeFieldContainer[QueueLeaseItem]
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., items: _Optional[_Iterable[_Union[QueueLeaseItem, _Mapping]]] = ...) -> None: ...

class ItemRef(_message.Message):
    __slots__ = ("id", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    version: int
    def __init__(self, id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class QueueCompleteRequest(_message.Message):
    __slots__ = ("queueName", "partition", "requestTimeout", "ids", "items")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REQUESTTIMEOUT_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    requestTimeout: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    items: _containers.RepeatedCompositeFieldContainer[ItemRef]
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., requestTimeout: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ..., items: _Optional[_Iterable[_Union[ItemRef, _Mapping]]] = ...) -> None: ...

class QueueRetryRequest(_message.Message):
    __slots__ = ("queueName", "partition", "items")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    items: _containers.RepeatedCompositeFieldContainer[QueueRetryItem]
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., items: _Optional[_Iterable[_Union[QueueRetryItem, _Mapping]]] = ...) -> None: ...

class QueueRetryItem(_message.Message):
    __slots__ = ("id", "retryAt", "dead", "version", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    RETRYAT_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    retryAt: _timestamp_pb2.Timestamp
    dead: bool
    version: int
    reason: str
    def __init__(self, id: _Optional[str] = ..., retryAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dead: _Optional[bool] = ..., version: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class QueueStatsRequest(_message.Message):
    __slots__ = ("queueName",)
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    def __init__(self, queueName: _Optional[str] = ...) -> None: ...

class QueueStatsResponse(_message.Message):
    __slots__ = ("queueName", "logicalQueues")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    LOGICALQUEUES_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    logicalQueues: _containers.RepeatedCompositeFieldContainer[QueueLogicalStats]
    def __init__(self, queueName: _Optional[str] = ..., logicalQueues: _Optional[_Iterable[_Union[QueueLogicalStats, _Mapping]]] = ...) -> None: ...

class QueueLogicalStats(_message.Message):
    __slots__ = ("produceWaiting", "leaseWaiting", "completeWaiting", "inFlight", "partitions")
    PRODUCEWAITING_FIELD_NUMBER: _ClassVar[int]
    LEASEWAITING_FIELD_NUMBER: _ClassVar[int]
    COMPLETEWAITING_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    produceWaiting: int
    leaseWaiting: int
    completeWaiting: int
    inFlight: int
    partitions: _containers.RepeatedCompositeFieldContainer[QueuePartitionStats]
    def __init__(self, produceWaiting: _Optional[int] = ..., leaseWaiting: _Optional[int] = ..., completeWaiting: _Optional[int] = ..., inFlight: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[QueuePartitionStats, _Mapping]]] = ...) -> None: ...

class QueuePartitionStats(_message.Message):
    __slots__ = ("partition", "total", "totalLeased", "failures", "averageAge", "averageLeasedAge", "scheduled", "deadLettered", "oldestAge")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTALLEASED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    AVERAGEAGE_FIELD_NUMBER: _ClassVar[int]
    AVERAGELEASEDAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    DEADLETTERED_FIELD_NUMBER: _ClassVar[int]
    OLDESTAGE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    total: int
    totalLeased: int
    failures: int
    averageAge: str
    averageLeasedAge: str
    scheduled: int
    deadLettered: int
    oldestAge: str
    def __init__(self, partition: _Optional[int] = ..., total: _Optional[int] = ..., totalLeased: _Optional[int] = ..., failures: _Optional[int] = ..., averageAge: _Optional[str] = ..., averageLeasedAge: _Optional[str] = ..., scheduled: _Optional[int] = ..., deadLettered: _Optional[int] = ..., oldestAge: _Optional[str] = ...) -> None: ...

class QueueClearRequest(_message.Message):
    __slots__ = ("queueName", "scheduled", "queue", "destructive")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    DESTRUCTIVE_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    scheduled: bool
    queue: bool
    destructive: bool
    def __init__(self, queueName: _Optional[str] = ..., scheduled: _Optional[bool] = ..., queue: _Optional[bool] = ..., destructive: _Optional[bool] = ...) -> None: ...

class QueueClearResponse(_message.Message):
    __slots__ = ("code", "codeText", "message", "details", "deleted")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    CODETEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    code: int
    codeText: str
    message: str
    details: _containers.ScalarMap[str, str]
    deleted: int
    def __init__(self, code: _Optional[int] = ..., codeText: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ..., deleted: _Optional[int] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("queueName", "createdAt", "updatedAt", "deadQueue", "reference", "leaseTimeout", "expireTimeout", "maxAttempts", "requestedPartitions", "partitions", "namespace", "queueId", "existOk", "paused")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    CREATEDAT_FIELD_NUMBER: _ClassVar[int]
    UPDATEDAT_FIELD_NUMBER: _ClassVar[int]
    DEADQUEUE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    LEASETIMEOUT_FIELD_NUMBER: _ClassVar[int]
    EXPIRETIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAXATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REQUESTEDPARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    QUEUEID_FIELD_NUMBER: _ClassVar[int]
    EXISTOK_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    createdAt: _timestamp_pb2.Timestamp
    updatedAt: _timestamp_pb2.Timestamp
    deadQueue: str
    reference: str
    leaseTimeout: str
    expireTimeout: str
    maxAttempts: int
    requestedPartitions: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    namespace: str
    queueId: int
    existOk: bool
    paused: bool
    def __init__(self, queueName: _Optional[str] = ..., createdAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updatedAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadQueue: _Optional[str] = ..., reference: _Optional[str] = ..., leaseTimeout: _Optional[str] = ..., expireTimeout: _Optional[str] = ..., maxAttempts: _Optional[int] = ..., requestedPartitions: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ..., namespace: _Optional[str] = ..., queueId: _Optional[int] = ..., existOk: _Optional[bool] = ..., paused: _Optional[bool] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: int
    def __init__(self, partition: _Optional[int] = ...) -> None: ...
