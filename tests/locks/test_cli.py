"""``querator locks list``, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_forks import run_cli

from querator import Querator
from querator.locks import Lock, Semaphore


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_locks_list_shows_holders(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    with Querator(url) as q:
        Lock(q, "idle")
        sem = Semaphore(q, "pool", 3, client_id="worker-7")
        permit = sem.acquire_permit(0)
        table = cli("locks", "list", "--url", url)
        listed = cli("locks", "list", "--url", url, "--json")
        sem.release(permit)
    assert table.returncode == 0, table.stderr
    header, idle, pool = table.stdout.splitlines()
    assert header.split()[:5] == ["NAME", "LIMIT", "FREE", "CLIENT", "STATE"]
    assert idle.split()[:5] == ["idle", "1", "1", "-", "-"]
    assert pool.split()[:5] == ["pool", "3", "2", "worker-7", "holds"]
    assert listed.returncode == 0, listed.stderr
    pool_json = json.loads(listed.stdout)[1]
    [holder] = pool_json["holders"]
    assert (holder["client_id"], holder["permit"]) == ("worker-7", permit.index)
    assert holder["token"] >= permit.token and holder["since"]
    assert pool_json["waiters"] == []
