"""Cron schedules: ticks, the schedule store, the scheduler and its API.

Internal: the public names are re-exported by :mod:`querator.workflows`.
"""
