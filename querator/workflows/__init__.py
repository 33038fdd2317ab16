"""Durable workflows and sagas (built on the lease queue)."""
