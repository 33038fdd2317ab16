"""Turning measurements into the table, the target checks, JSON and the docs block."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.results import Measurement, advantage
from benchmarks.systems import SYSTEMS

PEERS = ("plain", "pgqueuer", "procrastinate")
"""The systems querator is compared with (pgbench is the ceiling, not a peer)."""
SCENARIO_PEERS = {"workflows": ("dbos",), "messages": ("dbos",)}
"""Scenarios whose peers are not the lease queues: the workflow layer vs DBOS."""
COLUMN_ORDER = ("querator", "querator-threads", "querator-async", *PEERS)
LABELS = {name: system.label for name, system in SYSTEMS.items()}
LABELS["querator-threads"] = "querator (threads, 1 client)"
DOCS_BEGIN = "<!-- results:begin (written by python -m benchmarks run) -->"
DOCS_END = "<!-- results:end -->"


def _format(value: float, metric: str) -> str:
    if math.isnan(value):
        return "n/a"
    if metric.startswith("ms") or "statements" in metric or abs(value) < 10:
        return f"{value:,.2f}"
    return f"{value:,.0f}"


def _columns(rows: list[Measurement]) -> list[str]:
    present = {m.system for m in rows}
    ordered = [name for name in COLUMN_ORDER if name in present]
    return ordered + sorted(present - set(ordered))


def _ratio(
    cells: dict[str, Measurement], names: tuple[str, ...], fallback: dict[str, Measurement]
) -> str:
    """querator's advantage over the best peer of this row; a row no peer measured
    is compared with the best peer figure of the same metric in the scenario."""
    mine = cells.get("querator")
    peers = [cells[p] for p in names if p in cells]
    suffix = ""
    if mine is not None and not peers and mine.metric in fallback:
        peers, suffix = [fallback[mine.metric]], ", its best case"
    if mine is None or not peers:
        return ""
    best = max(peers, key=lambda m: advantage(m.value, mine.value, m.better))
    ratio = advantage(mine.value, best.value, mine.better)
    return f"{ratio:.2f}x ({LABELS.get(best.system, best.system)}{suffix})"


def _best_by_metric(rows: list[Measurement], names: tuple[str, ...]) -> dict[str, Measurement]:
    """The best peer measurement of each metric (for rows only querator measured)."""
    best: dict[str, Measurement] = {}
    for m in rows:
        if m.system in names and (
            m.metric not in best or advantage(m.value, best[m.metric].value, m.better) > 1
        ):
            best[m.metric] = m
    return best


def tables(measurements: Iterable[Measurement]) -> str:
    """One Markdown table per scenario: a row per (case, metric), a column per system."""
    by_scenario: dict[str, list[Measurement]] = {}
    for m in measurements:
        by_scenario.setdefault(m.scenario, []).append(m)
    out: list[str] = []
    for scenario, rows in by_scenario.items():
        columns = _columns(rows)
        names = SCENARIO_PEERS.get(scenario, PEERS)
        fallback = _best_by_metric(rows, names) if scenario in SCENARIO_PEERS else {}
        has_peers = "querator" in columns and any(p in columns for p in names)
        header = ["case", "metric", *(LABELS.get(c, c) for c in columns)]
        if has_peers:
            header.append("querator vs best peer")
        out += [f"### {scenario}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        keys: dict[tuple[str, str], dict[str, Measurement]] = {}
        for m in rows:
            keys.setdefault((m.case, m.metric), {})[m.system] = m
        for (case, metric), cells in keys.items():
            line = [case, metric] + [
                _format(cells[c].value, metric) if c in cells else "" for c in columns
            ]
            if has_peers:
                line.append(_ratio(cells, names, fallback))
            out.append("| " + " | ".join(line) + " |")
        out.append("")
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class Target:
    """One goal of issue 4 and how this run did."""

    goal: str
    measured: str
    met: bool | None
    """None: not measured in this run."""

    def line(self) -> str:
        status = {True: "met", False: "MISSED", None: "not measured"}[self.met]
        return f"| {self.goal} | {self.measured} | {status} |"


def _find(
    ms: list[Measurement], scenario: str, case_start: str, system: str, metric: str
) -> Measurement | None:
    for m in ms:
        if (m.scenario, m.system, m.metric) == (scenario, system, metric) and m.case.startswith(
            case_start
        ):
            return m
    return None


def targets(ms: list[Measurement]) -> list[Target]:
    """The targets of issue 4, checked against this run's medians."""
    found: list[Target] = []
    drain = "batch=100 consumers=4"
    mine = _find(ms, "drain", drain, "querator", "items/s")
    for peer, factor in (("pgqueuer", 3.0), ("procrastinate", 3.0), ("plain", 0.8)):
        theirs = _find(ms, "drain", drain, peer, "items/s")
        goal = f"drain {drain}: querator >= {factor:g}x {LABELS[peer]}"
        if mine is None or theirs is None:
            found.append(Target(goal, "", None))
            continue
        ratio = mine.value / theirs.value
        found.append(
            Target(
                goal,
                f"{mine.value:,.0f} vs {theirs.value:,.0f} items/s = {ratio:.2f}x",
                ratio >= factor,
            )
        )
    paced = _find(ms, "e2e", "paced", "querator", "ms latency p50")
    found.append(
        Target(
            "produce->lease latency p50 < 10 ms (waiting consumer)",
            f"{paced.value:.2f} ms" if paced else "",
            None if paced is None else paced.value < 10,
        )
    )
    idle = _find(ms, "idle", "", "querator", "statements/s per consumer")
    found.append(
        Target(
            "idle consumer < 1 statement/s",
            f"{idle.value:.3f}/s" if idle else "",
            None if idle is None else idle.value < 1,
        )
    )
    backlog = sorted(
        (
            m
            for m in ms
            if (m.scenario, m.system, m.metric) == ("backlog", "querator", "ms lease p50")
        ),
        key=lambda m: int(m.case.split("=")[1].replace(",", "")),
    )
    if len(backlog) >= 2:
        low, high = backlog[0], backlog[-1]
        ratio = high.value / low.value
        found.append(
            Target(
                f"lease p50 at {high.case} <= 1.5x at {low.case}",
                f"{high.value:.2f} vs {low.value:.2f} ms = {ratio:.2f}x",
                ratio <= 1.5,
            )
        )
    else:
        found.append(Target("lease latency, big backlog <= 1.5x small backlog", "", None))
    return found + _workflow_targets(ms)


def _workflow_targets(ms: list[Measurement]) -> list[Target]:
    """Issue 5: querator's best workflows/s against DBOS's best, and the wakeup."""
    rates = {
        system: max(
            (
                m
                for m in ms
                if (m.scenario, m.system, m.metric) == ("workflows", system, "workflows/s")
            ),
            key=lambda m: m.value,
            default=None,
        )
        for system in ("querator", "dbos")
    }
    mine, theirs = rates["querator"], rates["dbos"]
    goal = "3-step workflow: querator >= 5x DBOS (best case of each)"
    if mine is None or theirs is None:
        found = [Target(goal, "", None)]
    else:
        ratio = mine.value / theirs.value
        found = [
            Target(
                goal,
                f"{mine.value:,.0f} vs {theirs.value:,.0f} workflows/s = {ratio:.2f}x",
                ratio >= 5,
            )
        ]
    first = _find(ms, "workflows", "enqueue -> first step", "querator", "ms latency p50")
    found.append(
        Target(
            "workflow enqueue->first step p50 < 10 ms (idle worker)",
            f"{first.value:.2f} ms" if first else "",
            None if first is None else first.value < 10,
        )
    )
    return found


def targets_table(found: list[Target]) -> str:
    """The targets as a Markdown table."""
    lines = ["| target | measured (medians) | status |", "|---|---|---|"]
    return "\n".join(lines + [t.line() for t in found])


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as info:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), ""
            )
        with open("/proc/meminfo") as info:
            mem_kib = int(next(ln.split()[1] for ln in info if ln.startswith("MemTotal")))
    except (OSError, StopIteration, ValueError):
        mem_kib = 0
    versions = {}
    for package in ("querator", "psycopg", "pgqueuer", "asyncpg", "procrastinate", "dbos"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
    }


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write a results document (creating its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


def update_docs(path: Path, block: str) -> bool:
    """Replace the generated block of ``path``; False when its markers are missing."""
    text = path.read_text() if path.exists() else ""
    begin, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if begin < 0 or end < begin:
        return False
    path.write_text(text[: begin + len(DOCS_BEGIN)] + "\n" + block.strip() + "\n" + text[end:])
    return True
