"""Where a SQLite file's wakeup sockets live, whatever the length of its path or
of ``TMPDIR``: beside the file when short enough, else one fixed short place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from querator import Item, Querator
from querator.queue.backends.sqlite.wakeup import Wakeup, wake_directory


def test_a_short_path_keeps_its_sockets_beside_the_file(tmp_path: Path) -> None:
    short = Path("/tmp") / f"q{os.getpid()}.db"
    assert wake_directory(str(short)) == f"{short}.wake"


def test_long_paths_and_a_long_tmpdir_still_get_a_usable_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # as with a long TMPDIR
    db = deep / "q.db"
    directory = wake_directory(str(db))
    assert directory is not None and directory.startswith("/tmp/querator-")
    assert len(os.fsencode(directory)) + 41 <= 100
    assert Wakeup(str(db)).supported
    with Querator(f"sqlite:///{db}") as q:  # listeners bind there without failing
        q.create_queue("jobs")
        q.produce("jobs", [Item(payload=b"x")])
        [job] = q.lease("jobs", client_id="c", timeout=5)
        q.complete("jobs", [job])
