"""``querator migrate``: bring a store's schema to the version this querator knows.

Opening a store migrates it too; operators run this ahead of a deploy, to
apply migrations at a time of their choosing and see what they change
(``--dry-run`` lists the pending ones and changes nothing).
"""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from querator.cli.app import Url, _refuse_missing_file, _reporting, app
from querator.queue.options import DEFAULT_URL
from querator.queue.service import SchemaReport, migrate_store

DryRun = Annotated[
    bool, typer.Option("--dry-run", help="List the pending migrations; change nothing.")
]


@app.command("migrate")
def migrate(url: Url = DEFAULT_URL, dry_run: DryRun = False) -> None:
    """Create the store's schema, or migrate it to the newest version this querator knows."""
    with _reporting():
        _refuse_missing_file(url)
        report = anyio.run(migrate_store, url, not dry_run)
    for line in describe(report):
        typer.echo(line)


def describe(report: SchemaReport) -> list[str]:
    """What ``querator migrate`` prints about ``report``."""
    done = "" if report.applied else "dry run, nothing changed: "
    if report.before is None:
        verb = "created" if report.applied else "would be created"
        return [f"{done}no store yet: the {report.store} {verb} at schema version {report.after}"]
    if not report.pending:
        return [f"the {report.store} is at schema version {report.before}: nothing to migrate"]
    lines = [f"the {report.store} is at schema version {report.before}; migrations:"]
    lines += [f"  {version}  {name}" for version, name in report.pending]
    verb = "migrated" if report.applied else "would be migrated"
    lines.append(f"{done}the {report.store} {verb} to schema version {report.after}")
    return lines
