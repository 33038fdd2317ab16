from querator.http.proto import queue_pb2 as _queue_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueuesListRequest(_message.Message):
    __slots__ = ("pivot", "limit", "namespace")
    PIVOT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    pivot: str
    limit: int
    namespace: str
    def __init__(self, pivot: _Optional[str] = ..., limit: _Optional[int] = ..., namespace: _Optional[str] = ...) -> None: ...

class QueuesListResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_queue_pb2.QueueInfo]
    def __init__(self, items: _Optional[_Iterable[_Union[_queue_pb2.QueueInfo, _Mapping]]] = ...) -> None: ...

class QueuesDeleteRequest(_message.Message):
    __slots__ = ("queueName", "force")
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    force: bool
    def __init__(self, queueName: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class QueuesInfoRequest(_message.Message):
    __slots__ = ("queueName",)
    QUEUENAME_FIELD_NUMBER: _ClassVar[int]
    queueName: str
    def __init__(self, queueName: _Optional[str] = ...) -> None: ...

class QueuesCreateResponse(_message.Message):
    __slots__ = ("code", "codeText", "message", "details", "queue")
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
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    code: int
    codeText: str
    message: str
    details: _containers.ScalarMap[str, str]
    queue: _queue_pb2.QueueInfo
    def __init__(self, code: _Optional[int] = ..., codeText: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ..., queue: _Optional[_Union[_queue_pb2.QueueInfo, _Mapping]] = ...) -> None: ...
