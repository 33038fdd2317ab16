"""docs/http-api.md's table "Every operation, side by side" cannot drift: every
method of the client interface has a row, every endpoint the server answers
is in a row, and every endpoint, HTTP client method and CLI command a row
names exists (a row without an endpoint says why)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import httpx
import typer.main
from http_server import serve

import querator.http
from querator.cli import app
from querator.http.endpoints import ENDPOINTS
from querator.interface import Client, Run
from querator.webhooks.api import Webhooks

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
HEADING = "## Every operation, side by side"
NONE = "—"
NOT_OPERATIONS = {"__enter__", "__exit__"}
"""Members of the interface that are no operation (``close`` has its row)."""

Row = tuple[str, str, str, str, str]


def _rows() -> list[Row]:
    text = DOC.read_text()
    section = text[text.index(HEADING) :].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| library | endpoint | HTTP client | CLI | note |")
    rows: list[Row] = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, line
        rows.append((cells[0], cells[1], cells[2], cells[3], cells[4]))
    return rows


ROWS = _rows()


def _spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _members(protocol: type) -> set[str]:
    names = {name for name, _ in inspect.getmembers(protocol) if not name.startswith("_")}
    return names - {"mro", "webhooks", "run_id"}


def test_every_operation_of_the_interface_has_a_row() -> None:
    named = {span for row in ROWS for span in _spans(row[0])}
    wanted = {f"q.{name}" for name in _members(Client) - NOT_OPERATIONS}
    wanted |= {f"run.{name}" for name in _members(Run)}
    wanted |= {f"q.webhooks.{name}" for name in _members(Webhooks)}
    assert {"q.produce", "q.send", "run.result", "q.webhooks.send"} <= wanted
    assert not wanted - named, f"no row for {sorted(wanted - named)}"


def test_every_endpoint_is_in_a_row_and_every_row_names_real_ones() -> None:
    served = {endpoint.path for endpoint in ENDPOINTS}
    named: set[str] = set()
    gets: set[str] = set()
    for library, endpoint, _, _, note in ROWS:
        if endpoint == NONE:
            assert note, f"{library}: a row without an endpoint says why"
            continue
        for span in _spans(endpoint):
            if span.startswith("GET "):
                gets.add(span.removeprefix("GET "))
            else:
                assert span in served, f"{library}: no endpoint {span}"
                named.add(span)
    assert not served - named, f"endpoints in no row: {sorted(served - named)}"
    with serve("memory://") as base:
        for path in sorted(gets):
            answer = httpx.get(f"{base}{path}", timeout=30)
            assert answer.status_code not in (404, 405, 501), f"GET {path}: {answer.status_code}"


def test_every_http_client_method_a_row_names_exists() -> None:
    sync, aio = querator.http.Querator(), querator.http.AsyncQuerator()
    try:
        for library, _, method, _, note in ROWS:
            if method == NONE:
                assert note, f"{library}: a row without an HTTP client method says why"
                continue
            for span in _spans(method):
                owner, _, name = span.rpartition(".")
                for client in (sync, aio):
                    target = {
                        "q": client,
                        "q.webhooks": client.webhooks,
                        "run": client.run("r-parity"),
                    }[owner]
                    assert callable(getattr(target, name, None)) or name == "settings", (
                        f"{type(target).__qualname__} has no {name}"
                    )
                    assert hasattr(target, name)
    finally:
        sync.close()


def _commands(group: object, path: tuple[str, ...] = ()) -> set[str]:
    found = {" ".join(("querator", *path))}
    for name, command in getattr(group, "commands", {}).items():
        found |= _commands(command, (*path, name))
    return found


def test_every_command_a_row_names_exists() -> None:
    commands = _commands(typer.main.get_command(app))
    for library, _, _, command, _ in ROWS:
        for span in _spans(command):
            assert span in commands, f"{library}: no command {span!r}"
