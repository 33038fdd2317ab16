"""The web dashboard of ``querator serve``, at ``/ui``: runs and their steps,
queues and dead letters, live by server-sent events fed by the store's own
wakeups (see docs/dashboard.md).

Server-rendered (Jinja2 templates, htmx for partial updates); every asset is
served from this package; the same tokens and scopes as the HTTP API. Pages
read, and actions change, through the functions a Python user calls.
"""

from querator.dashboard.app import dashboard

__all__ = ["dashboard"]
