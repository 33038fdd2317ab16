"""One benchmark run: install peers if asked, run the scenarios, report."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import pg, report
from benchmarks.config import PROFILES
from benchmarks.context import Bench
from benchmarks.scenarios import SCENARIOS
from benchmarks.systems import SYSTEMS

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
RESULTS = HERE / "results"
DOCS = HERE.parent / "docs" / "benchmarks.md"


@dataclass(frozen=True, slots=True)
class Options:
    """What ``python -m benchmarks run`` was asked to do."""

    profile: str = "full"
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    systems: tuple[str, ...] = tuple(SYSTEMS)
    install: bool = True
    results_dir: Path = RESULTS
    update_docs: bool | None = None
    """None: update docs/benchmarks.md after a full run of every scenario."""
    command: str = ""


def install_peers() -> None:
    """``pip install -r benchmarks/requirements.txt`` here when a peer is missing."""
    missing = [
        s.requires
        for s in SYSTEMS.values()
        if s.requires and importlib.util.find_spec(s.requires) is None
    ]
    if not missing:
        return
    print(f"installing benchmark peers ({', '.join(missing)}) from {REQUIREMENTS}", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=False
    )
    importlib.invalidate_caches()


def run(options: Options) -> dict[str, object]:
    """Run the chosen scenarios; print and write the results; return the document."""
    if options.install:
        install_peers()
    chosen = [SYSTEMS[name] for name in options.systems]
    bench = Bench(PROFILES[options.profile], [s for s in chosen if s.available()])
    for system in chosen:
        if not system.available():
            bench.note(f"{system.label}: not installed (pip install -r {REQUIREMENTS}); skipped")
    started = time.time()
    try:
        for name in options.scenarios:
            bench.log(f"scenario {name}")
            SCENARIOS[name](bench)
    finally:
        bench.close()
    found = report.targets(bench.measurements)
    document: dict[str, object] = {
        "profile": options.profile,
        "command": options.command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": round(time.time() - started, 1),
        "machine": report.machine(),
        "server": pg.server_facts(),
        "measurements": [m.as_json() for m in bench.measurements],
        "targets": [_target(t) for t in found],
        "notes": bench.notes,
    }
    text = _summary(document, bench, found)
    print(text)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    report.write_json(options.results_dir / f"{stamp}-{options.profile}.json", document)
    report.write_json(options.results_dir / "latest.json", document)
    full = options.profile == "full" and set(options.scenarios) == set(SCENARIOS)
    wanted = options.update_docs or (options.update_docs is None and full)
    if wanted and not report.update_docs(DOCS, text):
        print(f"note: {DOCS} has no results markers; not updated", file=sys.stderr)
    return document


def _target(target: report.Target) -> dict[str, object]:
    return {"goal": target.goal, "measured": target.measured, "met": target.met}


def _summary(document: dict[str, object], bench: Bench, found: list[report.Target]) -> str:
    machine = document["machine"]
    server = document["server"]
    assert isinstance(machine, dict) and isinstance(server, dict)
    lines = [
        f"Profile `{document['profile']}`, started {document['started']}, "
        f"took {document['duration_s']} s: `{document['command']}`",
        "",
        f"Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gib']} GiB, "
        f"Python {machine['python']}; PostgreSQL {server.get('server_version')} "
        f"(shared_buffers {server.get('shared_buffers')}, synchronous_commit "
        f"{server.get('synchronous_commit')}) on the same machine. Packages: "
        + ", ".join(f"{k} {v}" for k, v in machine["packages"].items())
        + ".",
        "",
        "#### Targets (issue 4)",
        "",
        report.targets_table(found),
        "",
        report.tables(bench.measurements),
    ]
    if bench.notes:
        lines += ["#### Notes from the run", ""] + [f"- {note}" for note in bench.notes]
    return "\n".join(lines) + "\n"
