"""Required hooks are abstract methods: a subclass that leaves one out cannot be
made (a TypeError naming it), instead of failing with NotImplementedError once
the hook is first reached at run time."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from anyio.abc import TaskGroup

from querator.http.callers import Poster
from querator.http.runs_client import WorkflowCalls
from querator.queue.harness import LeaseWorker
from querator.queue.models import Leased

LOG = logging.getLogger("tests.required_hooks")
HOOKED: dict[str, Any] = {"concurrency": 1, "shutdown_grace": 1.0, "renewing": "t"}


class _NoRelease(LeaseWorker):
    def _poll(self, group: TaskGroup, items: TaskGroup) -> None:
        return None

    async def _handle(self, leased: Leased) -> None:
        return None


def test_a_lease_worker_without_its_required_hooks_is_refused() -> None:
    with pytest.raises(TypeError, match="_release_held"):
        _NoRelease(None, LOG, "w", **HOOKED)  # type: ignore[abstract,arg-type]
    with pytest.raises(TypeError, match=r"_handle.*_poll.*_release_held"):
        LeaseWorker(None, LOG, "w", **HOOKED)  # type: ignore[abstract,arg-type]


def test_workflow_calls_need_a_post() -> None:
    with pytest.raises(TypeError, match="_post"):
        WorkflowCalls()  # type: ignore[abstract]

    class Posting(WorkflowCalls):
        async def _post(
            self, path: str, body: dict[str, Any], answer: Any, wait: float = 0.0
        ) -> Any:
            return None

    assert Poster in type(Posting()).__mro__
