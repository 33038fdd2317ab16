"""Every command's ``--help`` reads as a person wrote it: flags show no value,
value options name their value, no Python type tags on options (``--version <bool>``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import typer.main
from typer.testing import CliRunner

from querator.cli import app

TYPE_TAG = re.compile(r"<(bool|str|int|float|int range|float range|path|datetime)>")


def _command_paths(group: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in sorted(getattr(group, "commands", {}).items()):
        if not getattr(command, "hidden", False):
            yield from _command_paths(command, (*path, name))


PATHS = list(_command_paths(typer.main.get_command(app)))


def test_every_command_is_walked() -> None:
    assert {("serve",), ("tokens", "list"), ("runs", "list"), ("webhooks", "send")} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "querator")
def test_help_shows_no_type_tags(path: tuple[str, ...]) -> None:
    done = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    options = [line for line in done.output.splitlines() if re.search(r"│ +-", line)]
    assert options and [line for line in options if TYPE_TAG.search(line)] == []
    assert re.search(r"--help +Show this message", done.output)


def test_value_options_name_their_value_and_serve_takes_url() -> None:
    done = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert re.search(r"--url +URL ", done.output)
    assert re.search(r"--port +PORT ", done.output)
    assert re.search(r"--shutdown-grace +SECONDS ", done.output)
    assert "--dsn" not in done.output  # a deprecated alias, not advertised
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert re.search(r"--version +Print the version", top.output)
