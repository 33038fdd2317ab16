"""Querator's protocol in protobuf, as Querator's own client speaks it: the
messages built from the ``.proto`` files, sent over real HTTP to a live
server; and the committed generated code is what the ``.proto`` files give."""

from __future__ import annotations

import filecmp
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from google.protobuf.message import Message

from querator.http.endpoints import QUEUE_ENDPOINTS
from querator.http.proto import queue_pb2 as pq
from querator.http.proto import queues_pb2 as pqs
from querator.http.proto.reply_pb2 import Reply
from querator.http.protocol import QUERATOR_CALLS

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "querator" / "http" / "proto"
SEND = {"Content-Type": "application/protobuf"}
"""What Querator's Go client sends (no Accept: its replies come in JSON)."""
BOTH = {**SEND, "Accept": "application/protobuf"}


def test_the_generated_code_is_what_the_proto_files_give(tmp_path: Path) -> None:
    target = tmp_path / "querator" / "http" / "proto"
    target.mkdir(parents=True)
    for proto in PROTO.glob("*.proto"):
        shutil.copy(proto, target)
    protos = [f"querator/http/proto/{p.name}" for p in PROTO.glob("*.proto")]
    command = [sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.",
               "--pyi_out=.", *protos]  # fmt: skip
    subprocess.run(command, cwd=tmp_path, check=True, capture_output=True)
    generated = sorted(p.name for p in target.glob("*_pb2.py*"))
    assert generated == sorted(p.name for p in PROTO.glob("*_pb2.py*"))
    for name in generated:
        assert filecmp.cmp(target / name, PROTO / name, shallow=False), (
            f"{name} differs from its .proto: run scripts/protoc.sh"
        )


def _names(message: type[Message]) -> set[str]:
    return {field.json_name for field in message.DESCRIPTOR.fields}


BY_PATH = {e.path: e for e in QUEUE_ENDPOINTS if e.messages is not None}


@pytest.mark.parametrize("path", sorted(BY_PATH))
def test_every_field_of_the_messages_is_a_field_of_the_models(path: str) -> None:
    endpoint = BY_PATH[path]
    assert endpoint.messages is not None
    request = {f.alias or name for name, f in endpoint.request.model_fields.items()}
    assert _names(endpoint.messages.request) <= request
    response = {f.alias or name for name, f in endpoint.response.model_fields.items()}
    assert _names(endpoint.messages.reply) == response


def test_every_call_of_the_protocol_is_served() -> None:
    assert set(QUERATOR_CALLS) <= {e.path for e in QUEUE_ENDPOINTS}


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    """A client of the module's server."""
    with httpx.Client(base_url=server, timeout=30) as client:
        yield client


def post(
    http: httpx.Client, path: str, message: Message, headers: dict[str, str]
) -> httpx.Response:
    return http.post(path, content=message.SerializeToString(), headers=headers)


def test_a_protobuf_client_creates_produces_leases_completes_and_retries(
    http: httpx.Client,
) -> None:
    name = f"pb-{secrets.token_hex(3)}"
    created = post(http, "/v1/queues.create", pq.QueueInfo(queueName=name, leaseTimeout="1m"), BOTH)
    assert created.status_code == 200
    assert created.headers["content-type"] == "application/protobuf"
    assert Reply.FromString(created.content).code == 200
    items = [pq.QueueProduceItem(utf8=f"job {n}", kind="job") for n in range(3)]
    produce = pq.QueueProduceRequest(queueName=name, requestTimeout="5s", items=items)
    assert post(http, "/v1/queue.produce", produce, BOTH).status_code == 200
    lease = pq.QueueLeaseRequest(queueName=name, batchSize=3, clientId="w", requestTimeout="5s")
    answer = post(http, "/v1/queue.lease", lease, BOTH)
    leased = pq.QueueLeaseResponse.FromString(answer.content)
    assert [item.bytes for item in leased.items] == [b"job 0", b"job 1", b"job 2"]
    assert leased.items[0].kind == "job" and leased.items[0].attempts == 1
    assert leased.items[0].HasField("leaseDeadline")
    assert leased.items[0].version == 0, "querator's fields are sent only when asked for"
    complete = pq.QueueCompleteRequest(
        queueName=name, requestTimeout="5s", ids=[leased.items[0].id]
    )
    assert post(http, "/v1/queue.complete", complete, BOTH).status_code == 200
    retry = pq.QueueRetryRequest(queueName=name, items=[pq.QueueRetryItem(id=leased.items[1].id)])
    assert post(http, "/v1/queue.retry", retry, BOTH).status_code == 200
    again = post(http, "/v1/queue.complete", complete, BOTH)
    assert again.status_code == 400
    error = Reply.FromString(again.content)
    assert (error.code, error.codeText) == (400, "Bad Request")
    assert error.message == f"invalid storage id; '{leased.items[0].id}' does not exist"
    stats = pq.QueueStatsResponse.FromString(
        post(http, "/v1/queue.stats", pq.QueueStatsRequest(queueName=name), BOTH).content
    )
    partition = stats.logicalQueues[0].partitions[0]
    assert (partition.total, partition.totalLeased) == (2, 1)


def test_a_protobuf_lease_completes_the_items_it_names_first(http: httpx.Client) -> None:
    name = f"pb-loop-{secrets.token_hex(3)}"
    assert post(http, "/v1/queues.create", pq.QueueInfo(queueName=name), BOTH).status_code == 200
    items = [pq.QueueProduceItem(utf8=f"job {n}") for n in range(3)]
    produce = pq.QueueProduceRequest(queueName=name, requestTimeout="5s", items=items)
    assert post(http, "/v1/queue.produce", produce, BOTH).status_code == 200
    extras = {**BOTH, "Querator-Extras": "true"}
    lease = pq.QueueLeaseRequest(queueName=name, batchSize=2, clientId="w", requestTimeout="5s")
    first = pq.QueueLeaseResponse.FromString(post(http, "/v1/queue.lease", lease, extras).content)
    held = [pq.ItemRef(id=item.id, version=item.version) for item in first.items]
    lease.complete.extend(held)

    second = pq.QueueLeaseResponse.FromString(post(http, "/v1/queue.lease", lease, extras).content)

    assert [item.bytes for item in second.items] == [b"job 2"]
    stats = pq.QueueStatsResponse.FromString(
        post(http, "/v1/queue.stats", pq.QueueStatsRequest(queueName=name), BOTH).content
    )
    assert stats.logicalQueues[0].partitions[0].total == 1
    again = post(http, "/v1/queue.lease", lease, BOTH)
    assert again.status_code == 400
    assert "does not exist" in Reply.FromString(again.content).message


def test_a_protobuf_request_gets_json_with_querators_fields_only(http: httpx.Client) -> None:
    name = f"pb-json-{secrets.token_hex(3)}"
    assert post(http, "/v1/queues.create", pq.QueueInfo(queueName=name), SEND).json()["code"] == 200
    item = pq.QueueProduceItem(bytes=b"x", headers={"k": "v"}, dedupKey="d")
    produce = pq.QueueProduceRequest(queueName=name, requestTimeout="5s", items=[item])
    assert post(http, "/v1/queue.produce", produce, SEND).json() == {
        "code": 200, "code_text": "OK", "message": "", "details": {}
    }  # fmt: skip
    lease = pq.QueueLeaseRequest(queueName=name, batchSize=1, clientId="w", requestTimeout="5s")
    reply = post(http, "/v1/queue.lease", lease, SEND).json()
    assert set(reply) == {"queue_name", "partition", "items"}
    assert set(reply["items"][0]) == {
        "encoding", "kind", "reference", "id", "attempts", "lease_deadline", "bytes"
    }  # fmt: skip
    info = post(http, "/v1/queues.info", pqs.QueuesInfoRequest(queueName=name), SEND).json()
    assert "queue_id" not in info and "exist_ok" not in info
    extras = {**SEND, "Querator-Extras": "true"}
    info = post(http, "/v1/queues.info", pqs.QueuesInfoRequest(queueName=name), extras).json()
    assert info["queue_id"] > 0


def test_protobuf_errors_are_duh_replies(http: httpx.Client) -> None:
    answer = http.post("/v1/queue.teleport", content=b"", headers=BOTH)
    assert answer.status_code == 501
    assert Reply.FromString(answer.content).message == "no such method; /v1/queue.teleport"
    answer = http.post("/v1/queue.stats", content=b"\xff\xff\xff", headers=BOTH)
    assert answer.status_code == 455
    assert Reply.FromString(answer.content).message.startswith("proto: ")
    bad = pq.QueueLeaseRequest(queueName="a b", batchSize=1, clientId="w", requestTimeout="1s")
    answer = post(http, "/v1/queue.lease", bad, BOTH)
    assert answer.status_code == 400
    assert Reply.FromString(answer.content).message == (
        "queue name is invalid; 'a b' cannot contain whitespace"
    )


def test_querators_own_calls_answer_protobuf_with_455(http: httpx.Client) -> None:
    answer = http.post("/v1/queue.renew", content=b"", headers=SEND)
    assert answer.status_code == 455
    assert "unrecognized content type" in answer.json()["message"]
    answer = http.post("/v1/queue.renew", json={}, headers={"Accept": "application/protobuf"})
    assert answer.status_code == 455
    assert "only [application/json]" in answer.json()["message"]


def test_the_client_refuses_an_unknown_encoding(server: str) -> None:
    from querator.errors import InvalidArgument
    from querator.http import Querator

    with pytest.raises(InvalidArgument, match="encoding"):
        Querator(server, encoding="xml")
