import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StorageItemsListRequest(_message.Message):
    __slots__ = ("queueName", "partition", "pivot", "limit")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PIVOT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    pivot: str
    limit: int
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., pivot: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class StorageItemsListResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StorageItem]
    def __init__(self, items: _Optional[_Iterable[_Union[StorageItem, _Mapping]]] = ...) -> None: ...

class StorageItemsImportRequest(_message.Message):
    __slots__ = ("queueName", "partition", "items")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    items: _containers.RepeatedCompositeFieldContainer[StorageItem]
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., items: _Optional[_Iterable[_Union[StorageItem, _Mapping]]] = ...) -> None: ...

class StorageItemsImportResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StorageItem]
    def __init__(self, items: _Optional[_Iterable[_Union[StorageItem, _Mapping]]] = ...) -> None: ...

class StorageItemsDeleteRequest(_message.Message):
    __slots__ = ("queueName", "partition", "ids")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    partition: int
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queueName: _Optional[str] = ..., partition: _Optional[int] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class StorageItem(_message.Message):
    __slots__ = ("id", "source_id", "isLeased", "leaseDeadline", "expireDeadline", "deadDeadline", "createdAt", "updatedAt", "enqueueAt", "attempts", "maxAttempts", "reference", "encoding", "kind", "payload", "version", "queue", "partition", "clientId", "availableAt", "headers", "dedupKey", "priority")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    ISLEASED_FIELD_NUMBER: _ClassVar[int]
    LEASEDEADLINE_FIELD_NUMBER: _ClassVar[int]
    EXPIREDEADLINE_FIELD_NUMBER: _ClassVar[int]
    DEADDEADLINE_FIELD_NUMBER: _ClassVar[int]
    CREATEDAT_FIELD_NUMBER: _ClassVar[int]
    UPDATEDAT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUEAT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAXATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    AVAILABLEAT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    DEDUPKEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    id: str
    source_id: str
    isLeased: bool
    leaseDeadline: _timestamp_pb2.Timestamp
    expireDeadline: _timestamp_pb2.Timestamp
    deadDeadline: _timestamp_pb2.Timestamp
    createdAt: _timestamp_pb2.Timestamp
    updatedAt: _timestamp_pb2.Timestamp
    enqueueAt: _timestamp_pb2.Timestamp
    attempts: int
    maxAttempts: int
    reference: str
    encoding: str
    kind: str
    payload: bytes
    version: int
    queue: str
    partition: int
    clientId: str
    availableAt: _timestamp_pb2.Timestamp
    headers: _containers.ScalarMap[str, str]
    dedupKey: str
    priority: int
    def __init__(self, id: _Optional[str] = ..., source_id: _Optional[str] = ..., isLeased: _Optional[bool] = ..., leaseDeadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expireDeadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadDeadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., createdAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updatedAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., enqueueAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[int] = ..., maxAttempts: _Optional[int] = ..., reference: _Optional[str] = ..., encoding: _Optional[str] = ..., kind: _Optional[str] = ..., payload: _Optional[bytes] = ..., version: _Optional[int] = ..., queue: _Optional[str] = ..., partition: _Optional[int] = ..., clientId: _Optional[str] = ..., availableAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., headers: _Optional[_Mapping[str, str]] = ..., dedupKey: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...
