"""``python -m benchmarks run [--quick]``: querator next to its peers, one machine."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from benchmarks.config import PROFILES


def _names(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})"
        )
    return names


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run."""
    from benchmarks import pg, runner
    from benchmarks.scenarios import SCENARIOS
    from benchmarks.systems import SYSTEMS

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the benchmarks and print the table")
    run.add_argument("--quick", action="store_true", help="small sizes (under 3 minutes)")
    run.add_argument(
        "--profile", choices=sorted(PROFILES), help="sizes by name (overrides --quick)"
    )
    run.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        type=lambda t: _names(t, tuple(SCENARIOS), "scenario"),
        help="comma-separated subset of: " + ", ".join(SCENARIOS),
    )
    run.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        type=lambda t: _names(t, tuple(SYSTEMS), "system"),
        help="comma-separated subset of: " + ", ".join(SYSTEMS),
    )
    run.add_argument(
        "--no-install",
        action="store_true",
        help="do not pip install missing peers (they are skipped)",
    )
    run.add_argument("--results-dir", type=Path, default=runner.RESULTS)
    docs = run.add_mutually_exclusive_group()
    docs.add_argument(
        "--update-docs",
        dest="update_docs",
        action="store_true",
        default=None,
        help="write the summary into docs/benchmarks.md",
    )
    docs.add_argument(
        "--no-docs",
        dest="update_docs",
        action="store_false",
        help="never touch docs/benchmarks.md (default: only full runs update it)",
    )
    commands.add_parser(
        "clean", help="drop throwaway databases left by killed runs (never a running one's)"
    )
    args = parser.parse_args(argv)
    if args.command == "clean":
        for name in pg.drop_leftovers():
            print(f"dropped {name}")
        return 0
    profile = args.profile or ("quick" if args.quick else "full")
    options = runner.Options(
        profile=profile,
        scenarios=args.scenarios,
        systems=args.systems,
        install=not args.no_install,
        results_dir=args.results_dir,
        update_docs=args.update_docs,
        command=shlex.join(["python", "-m", "benchmarks", *(argv or sys.argv[1:])]),
    )
    runner.run(options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
