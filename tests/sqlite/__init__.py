"""Tests that only make sense on SQLite: row layout, cached statements, dropped tables."""
