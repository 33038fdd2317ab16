"""Namespaces through one ``querator serve``: a call names its namespace in
the ``Querator-Namespace`` header (the clients' ``namespace=``); two
namespaces served by one server never see each other's items, and each lands
in its own store (read back with the library's own namespaced clients)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_server import serve
from pg_schemas import drop_schema

from http_api.token_cli import cli
from querator import Item, QueueSettings
from querator import Querator as Library
from querator.errors import Forbidden, InvalidArgument, QueratorError, Unauthorized
from querator.http import Querator
from querator.http.auth import create_token

NAMESPACES = ("acme", "globex")


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store with namespaces acme and globex beside its default one."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    for namespace in ("default", *NAMESPACES):
        Library(url, namespace=namespace).close()
    return url


@pytest.fixture
def server(store: str) -> Iterator[str]:
    """A server over :func:`store` serving every namespace it holds (its
    default one to a call that names none)."""
    with serve(store, "--serve-namespaces", "*") as url:
        yield url


def test_two_namespaces_through_one_server_never_meet(store: str, server: str) -> None:
    with (
        Querator(server, namespace="acme") as acme,
        Querator(server, namespace="globex") as globex,
        Querator(server) as default,
    ):
        for q in (acme, globex, default):
            q.create_queue("orders", QueueSettings())
        acme.produce("orders", [Item(payload=b"acme's", dedup_key="k")])
        globex.produce("orders", [Item(payload=b"globex's", dedup_key="k")])
        assert default.stats("orders").total == 0
        assert default.lookup("orders", ["k"]) == {}
        [got] = globex.lease("orders", client_id="w", batch_size=10, timeout=5)
        assert got.payload == b"globex's"
        [mine] = acme.lease("orders", client_id="w", timeout=5)
        assert mine.payload == b"acme's"
        globex.complete("orders", [got])
        with pytest.raises(QueratorError):  # acme's lease: globex holds no such item now
            globex.complete("orders", [mine])
        acme.retry("orders", [mine])
        assert acme.stats("orders").total == 1
    for namespace, expected in (("acme", [b"acme's"]), ("globex", []), ("default", [])):
        with Library(store, namespace=namespace) as lib:
            assert [i.payload for i in lib.list_items("orders")] == expected


def test_a_namespace_the_store_lacks_is_refused(store: str, server: str) -> None:
    with (
        Querator(server, namespace="initech") as q,
        pytest.raises(InvalidArgument, match="no namespace 'initech'"),
    ):
        q.list_queues()
    answer = httpx.post(
        f"{server}/v1/queues.list", json={}, headers={"Querator-Namespace": "Bad Name"}
    )
    assert answer.status_code == 400
    assert "namespace" in answer.json()["message"]
    with pytest.raises(InvalidArgument, match="namespace"):
        Querator(server, namespace="Bad Name")
    assert not (Path(store.removeprefix("sqlite:///") + "-namespaces") / "initech.db").exists()


def test_the_header_names_the_namespace_outright(store: str, tmp_path: Path) -> None:
    """A server of namespace acme (``--namespace``) serves the default one to
    a call that names it, and acme to a call that names none."""
    with (
        serve(store, "--namespace", "acme", "--serve-namespaces", "default") as url,
        Querator(url) as own,
        Querator(url, namespace="default") as default,
    ):
        own.create_queue("mine", QueueSettings())
        assert [i.name for i in default.list_queues()] == []
    with Library(store, namespace="acme") as lib:
        assert [i.name for i in lib.list_queues()] == ["mine"]


def test_the_deprecated_dsn_honours_the_namespace(store: str) -> None:
    with serve(store, "--dsn", store, "--namespace", "globex") as url, Querator(url) as q:
        q.create_queue("via-dsn", QueueSettings())
    with Library(store, namespace="globex") as lib:
        assert [i.name for i in lib.list_queues()] == ["via-dsn"]


@pytest.fixture
def pg_store(pg_dsn: str, pg_schema: str, pg_schema_url: str) -> Iterator[str]:
    """A PostgreSQL store (a fresh schema) with namespaces acme and globex; all dropped after."""
    for namespace in ("default", *NAMESPACES):
        Library(pg_schema_url, namespace=namespace).close()
    yield pg_schema_url
    for namespace in NAMESPACES:
        drop_schema(pg_dsn, f"{pg_schema}__{namespace}")


def test_namespaces_are_schemas_on_postgres(pg_store: str) -> None:
    with (
        serve(pg_store, "--serve-namespaces", "acme,globex") as server,
        Querator(server, namespace="acme") as acme,
        Querator(server, namespace="globex") as globex,
    ):
        for q in (acme, globex):
            q.create_queue("orders", QueueSettings())
        acme.produce("orders", [Item(payload=b"a")])
        assert globex.stats("orders").total == 0
        assert acme.stats("orders").total == 1
        with (
            Querator(server, namespace="initech") as initech,
            pytest.raises(Forbidden, match="serves namespace 'default', not 'initech'"),
        ):
            initech.list_queues()
    with Library(pg_store, namespace="acme") as lib:
        assert lib.stats("orders").total == 1


def test_tokens_are_the_servers_in_every_namespace(store: str) -> None:
    """A token of the server's own namespace opens the others; one kept in
    another namespace's store opens nothing."""
    with Library(store) as q:
        token, _ = q.call(create_token, q.aio, "ci", "read")
    with Library(store, namespace="acme") as q:
        stray, _ = q.call(create_token, q.aio, "acme-only", "admin")
    with serve(store, "--serve-namespaces", "acme") as url:
        with Querator(url, namespace="acme") as anonymous, pytest.raises(Unauthorized):
            anonymous.list_queues()
        with Querator(url, namespace="acme", token=token) as reader:
            assert [i.name for i in reader.list_queues()] == ["querator.tokens"]  # the stray
            with pytest.raises(Forbidden):  # the token's scope, in every namespace
                reader.create_queue("orders", QueueSettings())
        with Querator(url, namespace="acme", token=stray) as other, pytest.raises(Unauthorized):
            other.list_queues()


def test_a_token_for_some_namespaces_opens_only_those(store: str) -> None:
    """``--for-namespaces``: a token valid in acme only is refused in globex and
    in the server's own namespace, before the server opens them; a token made
    without it opens every namespace the server serves."""
    with Library(store) as q:
        acme_only, record = q.call(create_token, q.aio, "acme-ci", "admin", ["acme"])
        everywhere, _ = q.call(create_token, q.aio, "ops", "read")
    assert record.namespaces == ("acme",)
    with serve(store, "--serve-namespaces", "*") as url:
        with Querator(url, namespace="acme", token=acme_only) as acme:
            acme.create_queue("orders", QueueSettings())
        for other in ("globex", None):
            with (
                Querator(url, namespace=other, token=acme_only) as refused,
                pytest.raises(Forbidden, match=f"namespaces acme, not '{other or 'default'}'"),
            ):
                refused.list_queues()
        for namespace in ("acme", "globex", None):
            with Querator(url, namespace=namespace, token=everywhere) as anywhere:
                anywhere.list_queues()
    with Library(store, namespace="globex") as lib:
        assert lib.list_queues() == []


def test_the_cli_makes_and_lists_tokens_for_namespaces(store: str) -> None:
    made = cli("tokens", "create", "ci", "--for-namespaces", "acme,globex", "--url", store)
    assert made.returncode == 0, made.stderr
    listed = cli("tokens", "list", "--url", store)
    assert listed.stdout.splitlines()[1].split()[-1] == "acme,globex"
    bad = cli("tokens", "create", "ci", "--for-namespaces", "Bad Name", "--url", store)
    assert bad.returncode != 0
    assert "namespace" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("names", [[], ["Bad Name"], ["acme", "acme"]])
def test_a_token_for_bad_namespaces_is_refused_and_not_stored(store: str, names: list[str]) -> None:
    with Library(store) as q:
        with pytest.raises(InvalidArgument, match="namespace"):
            q.call(create_token, q.aio, "ci", "write", names)
        assert "querator.tokens" not in [info.name for info in q.list_queues()]


def test_a_server_serves_only_the_namespaces_it_is_told(store: str) -> None:
    with (
        serve(store, "--serve-namespaces", "acme") as url,
        Querator(url, namespace="acme") as acme,
        Querator(url, namespace="globex") as globex,
    ):
        acme.create_queue("orders", QueueSettings())
        with pytest.raises(Forbidden, match="not 'globex'"):
            globex.create_queue("orders", QueueSettings())
    with (
        serve(store) as url,
        Querator(url, namespace="acme") as acme,
        pytest.raises(Forbidden, match="--serve-namespaces"),
    ):
        acme.list_queues()
    with Library(store, namespace="globex") as lib:
        assert lib.list_queues() == []
