"""Namespaces: two namespaces of one store never see each other's queues or
items (SQLite, PostgreSQL; Citus in tests/citus/test_namespaces.py), the rules
of their names and URLs, and ``querator namespaces`` / ``--namespace``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance.helpers import items, make_queue
from pg_schemas import drop_schema, with_query
from typer.testing import CliRunner

from querator import Querator
from querator.cli import app
from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.backends.namespace_admin import delete_namespace, list_namespaces
from querator.queue.backends.namespaces import check_namespace, namespaced_url, with_namespace

STORES = ["sqlite", "postgres"]


@pytest.fixture(params=STORES)
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str, pg_schema: str
) -> Iterator[str]:
    """The URL of a fresh store (its default namespace); every namespace made
    beside it is dropped after the test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'q.db'}"
        return
    yield with_query(pg_dsn, schema=pg_schema)
    for namespace in ("acme", "globex"):
        drop_schema(pg_dsn, f"{pg_schema}__{namespace}")


def test_two_namespaces_never_see_each_other(store_url: str) -> None:
    with (
        Querator(store_url) as default,
        Querator(store_url, namespace="acme") as acme,
        Querator(with_namespace(store_url, "globex")) as globex,
    ):
        for client, name in ((default, "default"), (acme, "acme"), (globex, "globex")):
            make_queue(client, "work")
            client.produce("work", items(name.encode()))
        make_queue(acme, "only-acme")

        for client, name in ((default, "default"), (acme, "acme"), (globex, "globex")):
            [leased] = client.lease("work", client_id="t", timeout=5)
            assert leased.payload == name.encode()
            client.complete("work", [leased])
            assert client.stats("work").total == 0
        assert [info.name for info in acme.list_queues()] == ["only-acme", "work"]
        assert [info.name for info in globex.list_queues()] == ["work"]
        with pytest.raises(QueueNotFound):
            default.stats("only-acme")


def test_list_and_delete_namespaces(store_url: str) -> None:
    with Querator(store_url) as default, Querator(store_url, namespace="acme") as acme:
        make_queue(default, "work")
        make_queue(acme, "work")
        acme.produce("work", items(b"x"))
    assert list_namespaces(store_url) == ["default", "acme"]

    delete_namespace(store_url, "acme")
    assert list_namespaces(store_url) == ["default"]
    if store_url.startswith("sqlite:///"):
        folder = Path(store_url.removeprefix("sqlite:///") + "-namespaces")
        assert list(folder.iterdir()) == []
    with Querator(store_url, namespace="acme") as acme:  # made again, empty
        assert acme.list_queues() == []
    with Querator(store_url) as default:
        assert default.stats("work").total == 0
    with pytest.raises(InvalidArgument, match="default namespace"):
        delete_namespace(store_url, "default")
    with pytest.raises(InvalidArgument, match="no namespace 'globex'"):
        delete_namespace(store_url, "globex")


@pytest.mark.parametrize(
    "name", ["", "Acme", "1acme", "acme_", "ac__me", "ac-me", "a" * 31, "acme;drop"]
)
def test_bad_namespace_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgument, match="namespace"):
        check_namespace(name)
    with pytest.raises(InvalidArgument, match="namespace"):
        Querator("memory://", namespace=name)


def test_namespace_urls() -> None:
    pg = "postgresql://u@h:5432/db?schema=app&pool_max=3"
    assert namespaced_url(pg) == pg
    assert namespaced_url(pg, "default") == pg
    assert namespaced_url(pg, "acme") == "postgresql://u@h:5432/db?pool_max=3&schema=app__acme"
    assert namespaced_url("postgresql://h/db?namespace=acme") == (
        "postgresql://h/db?schema=querator__acme"
    )
    assert namespaced_url("sqlite:///data/q.db?namespace=acme") == (
        "sqlite:///data/q.db-namespaces/acme.db"
    )
    assert namespaced_url("sqlite:////abs/q.db", "acme") == "sqlite:////abs/q.db-namespaces/acme.db"
    assert namespaced_url("memory://", "acme") == "memory://"
    with pytest.raises(InvalidArgument, match="the URL says namespace=acme"):
        namespaced_url("sqlite:///q.db?namespace=acme", "globex")


def test_cli_namespaces_and_the_namespace_option(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    runner = CliRunner()
    with Querator(url) as default:
        make_queue(default, "in-default")

    created = runner.invoke(app, ["namespaces", "create", "acme", "--url", url])
    assert created.exit_code == 0, created.output
    with Querator(url, namespace="acme") as acme:
        make_queue(acme, "in-acme")
    listed = runner.invoke(app, ["namespaces", "list", "--url", url])
    assert listed.stdout.split() == ["default", "acme"]

    in_acme = runner.invoke(app, ["queues", "list", "--url", url, "--namespace", "acme"])
    assert in_acme.exit_code == 0, in_acme.output
    assert "in-acme" in in_acme.stdout and "in-default" not in in_acme.stdout
    from_env = runner.invoke(app, ["queues", "list", "--url", url], env={"QUERATOR_NAMESPACE": ""})
    assert "in-default" in from_env.stdout and "in-acme" not in from_env.stdout

    refused = runner.invoke(app, ["namespaces", "delete", "acme", "--url", url])
    assert refused.exit_code == 2
    deleted = runner.invoke(app, ["namespaces", "delete", "acme", "--url", url, "--force"])
    assert deleted.exit_code == 0, deleted.output
    assert runner.invoke(app, ["namespaces", "list", "--url", url]).stdout.split() == ["default"]
    bad = runner.invoke(app, ["queues", "list", "--url", url, "--namespace", "Bad!"])
    assert bad.exit_code == 2
    assert "namespace" in bad.output
