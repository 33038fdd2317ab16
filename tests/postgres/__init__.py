"""Tests that only make sense on PostgreSQL: catalog, schema, clock, wakeups."""
