"""Every ```python block of README.md and docs/*.md runs as written.

The conventions, for whoever writes the docs:

- **A block is a program.** Each ```python block is run on its own as a
  script (``python block.py`` in a fresh empty directory, ``PYTHONPATH``
  inherited: a process forked from one that imported querator, see
  tests/cli_zygote.py, or a fresh interpreter for Spark) and must exit 0
  within the timeout. A block that needs a store
  names it: ``sqlite:///name.db`` (a file in the current directory) or
  ``memory://``. Shell goes in ```bash blocks, output in ```text blocks, and
  fragments that cannot run get another fence (they are not run).
- **Output.** A ```text block right after a python block (blank lines
  between allowed) is what the program prints: its stdout must equal it, line
  for line; ``...`` in a line matches any text (as doctest's ELLIPSIS), for
  ids and timings. A block without one must print nothing.
- **SQLite and memory.** A block that names ``sqlite:///…`` runs twice: as
  written, and with every ``"sqlite:///…"`` string turned into
  ``"memory://"``: the same program on the in-memory store, with the same
  output.
- **PostgreSQL.** A block that names ``postgresql://`` reads its server from
  the ``DATABASE_URL`` environment variable (with a ``postgresql://`` default
  shown to the reader); the test sets it to ``QUERATOR_TEST_DSN`` with a fresh
  schema (``?schema=…``, dropped afterwards).
- **Spark.** A block that imports ``querator.spark`` runs on a local Spark
  session, with a longer timeout, and only on the store it names (a Spark
  session costs 10-20 s; the store makes no difference to Spark).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_forks import run_script
from pg_schemas import drop_schema, with_query

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 60.0
SPARK_TIMEOUT = 300.0
FENCE = re.compile(r"^```(\S*)")
SQLITE_URL = re.compile(r"""(["'])sqlite:///[^"']*\1""")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its fence, its text, and the output it shows."""

    path: Path
    line: int
    lang: str
    code: str
    output: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, each python one with its ```text output."""
    lines = path.read_text().splitlines()
    raw: list[tuple[int, str, str]] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        raw.append((i + 1, match[1], "\n".join(lines[i + 1 : end]) + "\n"))
        i = end + 1
    blocks = []
    for k, (line, lang, code) in enumerate(raw):
        output = None
        if k + 1 < len(raw) and raw[k + 1][1] == "text":
            between = lines[line + code.count("\n") + 1 : raw[k + 1][0] - 1]
            if all(not text.strip() for text in between):
                output = raw[k + 1][2]
        blocks.append(Block(path, line, lang, code, output))
    return blocks


def python_blocks() -> list[Block]:
    return [b for path in DOCS for b in fenced_blocks(path) if b.lang == "python"]


def cases() -> list[object]:
    """One case per block and store: ``file:line`` (``file:line-memory`` for the rerun)."""
    params: list[object] = []
    for block in python_blocks():
        marks = pytest.mark.timeout(timeout_for(block) + 30)
        params.append(pytest.param(block, False, id=block.where, marks=marks))
        if SQLITE_URL.search(block.code) and not is_spark(block):
            params.append(pytest.param(block, True, id=f"{block.where}-memory", marks=marks))
    return params


def is_spark(block: Block) -> bool:
    return "querator.spark" in block.code


def timeout_for(block: Block) -> float:
    return SPARK_TIMEOUT if is_spark(block) else TIMEOUT


def matches(expected: str, actual: str) -> bool:
    """``actual`` equals ``expected`` line for line, ``...`` matching any text."""
    want, got = expected.rstrip("\n").splitlines(), actual.rstrip("\n").splitlines()
    if len(want) != len(got):
        return False
    for pattern, line in zip(want, got, strict=True):
        regex = ".*".join(re.escape(part) for part in pattern.split("..."))
        if not re.fullmatch(regex, line.rstrip()):
            return False
    return True


def environment(block: Block, request: pytest.FixtureRequest) -> dict[str, str]:
    env = dict(os.environ)
    if "postgresql://" in block.code:
        dsn = str(request.getfixturevalue("pg_dsn"))
        schema = f"docs_{secrets.token_hex(6)}"
        request.addfinalizer(lambda: drop_schema(dsn, schema))
        env["DATABASE_URL"] = with_query(dsn, schema=schema)
    return env


@pytest.mark.parametrize(("block", "on_memory"), cases())
def test_block_runs_as_written(
    block: Block, on_memory: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code = SQLITE_URL.sub(r"\1memory://\1", block.code) if on_memory else block.code
    script = tmp_path / "block.py"
    script.write_text(code)
    try:
        if is_spark(block):  # a fresh interpreter, as Spark's own processes want
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                env=environment(block, request),
                capture_output=True,
                text=True,
                timeout=timeout_for(block),
                check=False,
            )
        else:
            done = run_script(
                script, cwd=tmp_path, env=environment(block, request), timeout=timeout_for(block)
            )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"{block.where} did not end in {hung.timeout} s:\n{hung.stderr!r}")
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr}"
    expected = block.output or ""
    assert matches(expected, done.stdout), (
        f"{block.where} printed:\n{done.stdout}\nbut the doc shows:\n{expected}"
    )


def test_every_doc_has_its_blocks_found() -> None:
    found = {b.path.name for b in python_blocks()}
    assert {"README.md", "quickstart.md", "workflows.md", "sagas.md"} <= found
