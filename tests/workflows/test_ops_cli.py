"""The ``querator`` command, run as a real subprocess against a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_forks import run_cli
from polling import wait_for
from worker_threads import serving

from querator import Item, Querator, QueueSettings
from querator.cli import load_functions
from querator.errors import InvalidArgument
from querator.workflows import (
    RunHandle,
    Worker,
    WorkflowCancelled,
    list_schedules,
    schedule,
    start,
    trigger_schedule,
)
from querator.workflows.inspection import list_runs

from .ops_flows import chain, greet, hello, link
from .ops_procs import WorkerProc

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m querator.cli ARGS`` from the repository root (a forked process)."""
    return run_cli(*args, env={**os.environ, **(env or {})})


def spawn_cli_worker(url: str, tmp_path: Path) -> WorkerProc:
    err = tmp_path / "cli-worker.err"
    options = ["--url", url, "--concurrency", "2", "--client-id", "cli-w"]
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "querator.cli", "worker", "tests.workflows.ops_flows", *options],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return WorkerProc("cli-w", proc, err)


def test_worker_serves_runs_and_the_cli_shows_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, greet, "ada")
        pending = cli("runs", "list", "--url", url, "--status", "running")
        assert run.run_id in pending.stdout, pending.stderr
        worker = spawn_cli_worker(url, tmp_path)
        try:
            assert run.result(timeout=30) == "hello ada / hello ADA"
        finally:
            assert worker.terminate() == 0, worker.stderr()
    logs = worker.stderr()
    assert f"run {run.run_id} step ops.hello@0" in logs
    assert "querator.worker" in logs and "stopped" in logs

    listed = cli("runs", "list", env={"QUERATOR_URL": url})
    assert listed.returncode == 0, listed.stderr
    [line] = [ln for ln in listed.stdout.splitlines() if run.run_id in ln]
    assert line.split()[1:3] == ["completed", "ops.greet"]
    assert run.run_id not in cli("runs", "list", "--url", url, "--status", "failed").stdout

    shown = cli("runs", "show", run.run_id, "--url", url)
    assert shown.returncode == 0, shown.stderr
    assert "status:   completed" in shown.stdout
    assert shown.stdout.count("ops.hello") == 2 and '"hello ADA"' in shown.stdout
    as_json = json.loads(cli("runs", "show", run.run_id, "--url", url, "--json").stdout)
    assert [s["step"] for s in as_json["steps"]] == ["ops.hello", "ops.hello"]

    queues = cli("queues", "list", "--url", url)
    assert "ops.work" in queues.stdout and "querator.results" in queues.stdout
    stats = cli("queues", "stats", "ops.work", "--url", url)
    assert stats.returncode == 0 and stats.stdout.splitlines()[-1].split()[:2] == ["all", "0"]


def test_cli_errors_are_reported_with_an_exit_status(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    Querator(url).close()  # an empty store (reading commands create none)
    missing_run = cli("runs", "show", "run-nope", "--url", url)
    assert missing_run.returncode == 2 and "error:" in missing_run.stderr
    missing_queue = cli("queues", "stats", "nope", "--url", url)
    assert missing_queue.returncode == 1 and "nope" in missing_queue.stderr
    bad_module = cli("worker", "tests.workflows.no_such_module", "--url", url)
    assert bad_module.returncode == 2 and "no_such_module" in bad_module.stderr
    bad_status = cli("runs", "list", "--status", "sleeping", "--url", url)
    assert bad_status.returncode == 2 and "status" in bad_status.stderr


def test_functions_are_found_by_module_attribute_or_file(tmp_path: Path) -> None:
    found = load_functions("tests.workflows.ops_flows")
    assert {f.name for f in found} >= {"ops.greet", "ops.hello", "ops.chain", "ops.link"}
    assert [f.name for f in load_functions("tests.workflows.ops_flows:hello")] == ["ops.hello"]
    flows = tmp_path / "my_flows.py"
    flows.write_text(
        "from querator.workflows import step, workflow\n"
        "@step(name='f.s')\ndef s() -> int:\n    return 1\n"
        "@workflow(name='f.w')\ndef w() -> int:\n    return s()\n"
        "ALL = [w, s]\nONLY = [w]\n"
    )
    assert sorted(f.name for f in load_functions(str(flows))) == ["f.s", "f.w"]
    assert [f.name for f in load_functions(f"{flows}:ONLY")] == ["f.w"]
    with pytest.raises(InvalidArgument):
        load_functions(f"{flows}:nothing")
    with pytest.raises(InvalidArgument):
        load_functions("json")  # a module without steps or workflows
    assert greet.name == "ops.greet" and hello.name == "ops.hello"


def test_cancel_and_retry_compensation_commands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, greet, "grace")  # no worker: it stays running
        retried = cli("runs", "retry-compensation", run.run_id, "--url", url)
        assert retried.returncode == 1 and "not compensation_failed" in retried.stdout
        cancelled = cli("runs", "cancel", run.run_id, "--reason", "ops", "--url", url)
        assert cancelled.returncode == 0 and "cancel requested" in cancelled.stdout
        worker = spawn_cli_worker(url, tmp_path)
        try:
            with pytest.raises(WorkflowCancelled):
                run.result(timeout=30)
        finally:
            assert worker.terminate() == 0, worker.stderr()
        again = cli("runs", "cancel", run.run_id, "--url", url)
        assert again.returncode == 1 and "already ended" in again.stdout
    unknown = cli("runs", "cancel", "run-nope", "--url", url)
    assert unknown.returncode == 2


EDITED_GREET = """
from querator.workflows import step, workflow

@step(name="ops.hello_v2")
def hello_v2(name: str) -> str:
    return f"hi {name}"

@workflow(name="ops.greet", queue="ops.work")
def greet(name: str) -> str:
    return hello_v2(name) + " / " + hello_v2(name.upper())
"""


def test_runs_replay_checks_new_code_against_stored_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, greet, "ada")
        with serving(Worker(q, [greet], poll_timeout=1.0), join_timeout=15):
            assert run.result(timeout=30) == "hello ada / hello ADA"
    same = cli("runs", "replay", run.run_id, "--app", "tests.workflows.ops_flows", "--url", url)
    assert same.returncode == 0, same.stderr
    assert f"{run.run_id}  ok  ops.greet: 2 stored step(s), ran to its end" in same.stdout
    edited = tmp_path / "edited_flows.py"
    edited.write_text(EDITED_GREET)
    changed = cli("runs", "replay", "--running", run.run_id, "--app", str(edited), "--url", url)
    assert changed.returncode == 1, changed.stderr
    assert "NonDeterminism" in changed.stdout
    assert "'ops.hello'" in changed.stdout and "'ops.hello_v2'" in changed.stdout
    nothing = cli("runs", "replay", "--app", "tests.workflows.ops_flows", "--url", url)
    assert nothing.returncode == 2 and "--running" in nothing.stderr
    gate = ["runs", "replay", "--running", "--app", "tests.workflows.ops_flows", "--url", url]
    idle = cli(*gate)  # the pre-deploy gate with nothing running passes
    assert idle.returncode == 0, idle.stderr
    assert idle.stdout.startswith("nothing to check: no run of the 7 workflow(s) of tests.")
    assert cli(*gate, "--json").stdout == ""


def test_health_reports_the_store_for_probes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'health.db'}"
    with Querator(url) as q:
        q.create_queue("jobs")
        q.produce("jobs", [Item(payload=b"old")])
    ok = cli("health", "--url", url, "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["store"] == "reachable" and report["queues"] == 1 and report["healthy"]
    assert report["oldest_age"] >= 0
    stale = cli("health", "--url", url, "--max-age", "0")
    assert stale.returncode == 1 and "healthy:    False" in stale.stdout
    down = cli("health", "--url", "postgresql://root@127.0.0.1:1/none", "--json")
    assert down.returncode == 1
    assert json.loads(down.stdout)["store"] == "unreachable"


def test_health_can_require_synchronous_replication(tmp_path: Path, pg_schema_url: str) -> None:
    """The test server has no standby: reachable, but not what the flag requires
    (the failover test in tests/faults checks a primary with a synchronous one)."""
    plain = cli("health", "--url", pg_schema_url, "--json")
    assert plain.returncode == 0, plain.stderr
    strict = cli("health", "--url", pg_schema_url, "--require-sync-replication", "--json")
    assert strict.returncode == 1
    report = json.loads(strict.stdout)
    assert report["store"] == "reachable" and not report["healthy"]
    assert report["replication"]["synchronous"] is False
    assert report["replication"]["sync_standbys"] == 0
    assert isinstance(report["replication"]["timeline"], int)
    sqlite = cli("health", "--url", f"sqlite:///{tmp_path / 'h.db'}", "--require-sync-replication")
    assert sqlite.returncode == 1 and "not a PostgreSQL store" in sqlite.stdout


def test_dead_letters_are_listed_requeued_and_purged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dead.db'}"
    with Querator(url) as q:
        q.create_queue("orders-dead")
        q.create_queue("orders", QueueSettings(max_attempts=1, dead_queue="orders-dead"))
        q.produce("orders", [Item(payload=f"order {i}".encode(), kind="order") for i in range(3)])
        for item in q.lease("orders", client_id="t", batch_size=3, timeout=5):
            q.retry("orders", [item], dead=True)
        dead_ids = [item.id for item in q.list_items("orders-dead", limit=10)]
    listed = cli("dead", "list", "orders", "--url", url)
    assert listed.returncode == 0, listed.stderr
    assert "orders: 3 dead letter(s)" in listed.stdout and "order 1" in listed.stdout
    assert "EXPIRES" in listed.stdout and "never" in listed.stdout
    [row] = [line.split() for line in listed.stdout.splitlines() if line.startswith(dead_ids[0])]
    assert row[1] == "orders"  # the queue it came from
    assert row[4] == "1"  # the leases it had in "orders", not its own in the dead queue
    assert "moved by retry(dead=True)" in listed.stdout
    stats = cli("queues", "stats", "orders-dead", "--url", url)
    assert "dead letters arriving here kept until requeued or purged" in stats.stdout
    shown = cli("dead", "show", "orders", dead_ids[0], "--url", url)
    assert json.loads(shown.stdout)["payload"] == "order 0"
    one = cli("dead", "requeue", "orders", dead_ids[0], "--url", url)
    assert "1 dead letter(s) requeued" in one.stdout, one.stderr
    neither = cli("dead", "purge", "orders", "--url", url)
    assert neither.returncode == 2 and "--all" in neither.stderr
    rest = cli("dead", "purge", "orders", "--all", "--url", url)
    assert "2 dead letter(s) purged" in rest.stdout, rest.stderr
    with Querator(url) as q:
        [back] = q.lease("orders", client_id="t", timeout=5)
        assert back.payload == b"order 0" and back.attempts == 1
        assert q.list_items("orders-dead") == []
    none = cli("dead", "list", "orders-dead", "--url", url)
    assert none.returncode == 2 and "has no dead_queue" in none.stderr


def test_queues_delete_refuses_a_queue_with_items_unless_forced(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'delete.db'}"
    with Querator(url) as q:
        q.create_queue("orders")
        q.produce("orders", [Item(payload=b"a"), Item(payload=b"b")])
    refused = cli("queues", "delete", "orders", "--url", url)
    assert refused.returncode == 1, refused.stderr
    assert "holds 2 item(s)" in refused.stderr and "Traceback" not in refused.stderr
    forced = cli("queues", "delete", "orders", "--force", "--url", url)
    assert forced.returncode == 0 and "orders: deleted" in forced.stdout, forced.stderr
    with Querator(url) as q:
        assert q.list_queues() == []


def test_queues_pause_and_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pause.db'}"
    with Querator(url) as q:
        q.create_queue("orders")
    paused = cli("queues", "pause", "orders", "--url", url)
    assert paused.returncode == 0 and "orders: paused" in paused.stdout, paused.stderr
    stats = cli("queues", "stats", "orders", "--url", url)
    assert "paused: its items are not leased" in stats.stdout, stats.stderr
    with Querator(url) as q:
        assert q.get_queue("orders").paused
    resumed = cli("queues", "resume", "orders", "--url", url)
    assert resumed.returncode == 0 and "orders: resumed" in resumed.stdout, resumed.stderr
    with Querator(url) as q:
        assert not q.get_queue("orders").paused
    missing = cli("queues", "pause", "nope", "--url", url)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_schedules_are_listed_paused_triggered_and_deleted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sched.db'}"
    with Querator(url) as q:
        schedule(q, "greetings", greet, cron="0 3 * * *", args=("ada",))
    listed = cli("schedules", "list", "--url", url)
    assert listed.returncode == 0, listed.stderr
    assert "greetings" in listed.stdout and "ops.greet" in listed.stdout
    assert cli("schedules", "pause", "greetings", "--url", url).returncode == 0
    shown = json.loads(cli("schedules", "show", "greetings", "--url", url).stdout)
    assert shown["paused"] is True and shown["next_fire"] is None
    triggered = cli("schedules", "trigger", "greetings", "--url", url)
    assert triggered.stdout.strip().startswith("run-"), triggered.stderr
    assert cli("schedules", "delete", "greetings", "--url", url).returncode == 0
    again = cli("schedules", "delete", "greetings", "--url", url)
    assert again.returncode == 1 and "no such schedule" in again.stdout


def test_reading_commands_never_create_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for args in (["runs", "list"], ["queues", "list"], ["schedules", "list"]):
        done = cli(*args, "--url", f"sqlite:///{missing}")
        assert done.returncode == 1 and f"no store at sqlite:///{missing}" in done.stderr
    assert not missing.exists()
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("querator ")


def test_start_runs_a_workflow_from_the_shell_and_waits_for_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'start.db'}"
    Querator(url).close()
    app = ["--app", "tests.workflows.ops_flows", "--url", url]
    started = cli("start", "ops.greet", *app, "--args", '["ada"]', "--key", "k1")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    again = cli("start", "ops.greet", *app, "--args", '{"name": "ada"}', "--key", "k1")
    assert again.stdout.strip() == run_id  # same key, same run
    with Querator(url) as q, serving(Worker(q, [greet, hello])):
        waited = cli("start", "ops.greet", *app, "--args", '["bo"]', "--wait", "--json")
        assert waited.returncode == 0, waited.stderr
        report = json.loads(waited.stdout)
        assert (report["status"], report["result"]) == ("completed", "hello bo / hello BO")
        assert RunHandle(q, run_id).result(timeout=30) == "hello ada / hello ADA"

    bad = {
        "no such workflow": cli("start", "ops.nope", *app),
        "not JSON": cli("start", "ops.greet", *app, "--args", "[ada"),
        "a bare string": cli("start", "ops.greet", *app, "--args", '"ada"'),
        "missing argument": cli("start", "ops.greet", *app, "--args", "[]"),
        "wrong type": cli("start", "ops.greet", *app, "--args", "[[1, 2]]"),
    }
    for what, done in bad.items():
        assert done.returncode == 2, (what, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (what, done.stderr)
    assert "ops.greet" in bad["no such workflow"].stderr  # names the workflows it has
    floats = ["--app", "tests.http_api.http_flows", "--url", url]
    for number in ["NaN", "Infinity", "-Infinity"]:
        refused = cli("start", "http.slow", *floats, "--args", f"[{number}]")
        assert refused.returncode == 2, (number, refused.stdout, refused.stderr)
        assert "argument 'seconds'" in refused.stderr and "NaN" in refused.stderr
    with Querator(url) as q:
        assert len(list_runs(q)) == 2  # the refused starts wrote nothing


def test_runs_list_filters_and_prints_a_json_array(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'list.db'}"
    with Querator(url) as q:
        first = start(q, greet, "a")
        second = start(q, greet, "b")
    listed = cli("runs", "list", "--url", url, "--json", "--workflow", "ops.greet")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["run_id"] for r in runs] == [second.run_id, first.run_id]  # newest first
    assert runs[0]["status"] == "running" and "steps" not in runs[0]
    assert json.loads(cli("runs", "list", "--url", url, "--json", "--since", "1h").stdout)
    assert json.loads(cli("runs", "list", "--url", url, "--json", "--workflow", "x").stdout) == []
    future = cli("runs", "list", "--url", url, "--json", "--since", "2999-01-01T00:00:00")
    assert json.loads(future.stdout) == []
    bad = cli("runs", "list", "--url", url, "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr
    reindexed = cli("runs", "reindex", "--url", url)
    assert reindexed.returncode == 0 and "2 run(s) indexed" in reindexed.stdout


def test_bad_worker_options_are_one_line_before_anything_starts(tmp_path: Path) -> None:
    missing = str(tmp_path / "never-imported.py")  # would fail to import if it got that far
    for option in (["--log-level", "LOUD"], ["--concurrency", "0"]):
        done = cli("worker", missing, *option)
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert option[0] in line and "never-imported" not in line


def test_schedules_list_shows_orphans(tmp_path: Path) -> None:
    """A schedule whose workflow no live worker serves is marked: its runs wait."""
    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    with Querator(url) as q:
        schedule(q, "greetings", greet, cron="0 3 * * *", args=("ada",))
        schedule(q, "chains", chain, cron="0 4 * * *", args=("c",))
        run = trigger_schedule(q, "greetings")
        # a worker of the same queue that does not serve ops.greet
        with serving(Worker(q, [chain, link])):
            wait_for(lambda: [s.name for s in list_schedules(q) if not s.orphan] == ["chains"])
            [orphan] = [s for s in list_schedules(q) if s.orphan]
            assert orphan.name == "greetings" and orphan.last_run_status == "running"
            assert run.status() == "running"  # waits for a worker that serves it
            listed = cli("schedules", "list", "--url", url)
    [line] = [ln for ln in listed.stdout.splitlines() if ln.startswith("greetings")]
    assert line.endswith("running ORPHAN")
    assert "ORPHAN greetings: no live worker serves 'ops.greet'" in listed.stderr
    assert "chains" not in listed.stderr


def test_an_unreachable_postgresql_is_one_line_naming_host_and_port() -> None:
    url = "postgresql://root@127.0.0.1:1/none"
    for args in (["runs", "list"], ["queues", "list"], ["schedules", "list"]):
        done = cli(*args, "--url", url)
        assert done.returncode == 1, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "127.0.0.1" in line and "port 1" in line and "refused" in line.lower(), line


def test_runs_are_listed_where_they_hold_search_attributes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'where.db'}"
    with Querator(url) as q:
        acme = start(q, greet, "ada", attributes={"customer": "acme", "amount": 1999})
        text = start(q, greet, "bob", attributes={"customer": "acme", "amount": "1999"})
        start(q, greet, "cy", attributes={"customer": "globex"})
    both = cli("runs", "list", "--url", url, "--where", "customer=acme")
    assert both.returncode == 0, both.stderr
    assert [ln.split()[0] for ln in both.stdout.splitlines()[1:]] == [text.run_id, acme.run_id]
    where = ["--where", "customer=acme", "--where", "amount=1999"]  # an AND; 1999 an int
    one = cli("runs", "list", "--url", url, *where)
    assert [ln.split()[0] for ln in one.stdout.splitlines()[1:]] == [acme.run_id]
    quoted = cli("runs", "list", "--url", url, "--where", 'amount="1999"', "--json")
    assert [r["run_id"] for r in json.loads(quoted.stdout)] == [text.run_id]
    shown = cli("runs", "show", acme.run_id, "--url", url)
    assert 'attrs:    {"amount": 1999, "customer": "acme"}' in shown.stdout
    assert cli("runs", "list", "--url", url, "--where", "amount=1.5").stdout.count("\n") == 1
    bad = cli("runs", "list", "--url", url, "--where", "note=" + "x" * 257)
    assert bad.returncode != 0 and "--where" in bad.stderr
    bad = cli("runs", "list", "--url", url, "--where", "customer")
    assert bad.returncode != 0 and "name=value" in bad.stderr
    app = ["--app", "tests.workflows.ops_flows", "--url", url]
    attrs = ["--attr", "customer=initech", "--attr", "amount=5"]
    started = cli("start", "ops.greet", *app, "--args", '["dee"]', *attrs)
    assert started.returncode == 0, started.stderr
    found = cli("runs", "list", "--url", url, "--where", "customer=initech", "--json")
    [run] = json.loads(found.stdout)
    assert run["run_id"] == started.stdout.strip()
    assert run["attributes"] == {"customer": "initech", "amount": 5}
