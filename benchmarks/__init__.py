"""Reproducible benchmarks of querator next to its peers on one PostgreSQL.

Run ``python -m benchmarks run`` (or ``--quick``); see ``docs/benchmarks.md``.
Nothing here is imported by querator itself; the peers (PgQueuer,
Procrastinate, DBOS) are benchmark-only dependencies listed in
``benchmarks/requirements.txt``.
"""
