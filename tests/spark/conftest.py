"""Spark test fixtures: one local SparkSession per test module (the JVM starts once)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from worker_threads import serving

from querator import Querator
from querator.spark import SparkResource
from querator.workflows import Worker

from .flows import LOCAL_CONF

RunWorker = Callable[..., AbstractContextManager[Worker]]


@pytest.fixture(scope="module")
def spark_resource() -> Iterator[SparkResource]:
    """A ``local[2]`` session shared by the module's workers (not stopped by them)."""
    resource = SparkResource(master="local[2]", conf=LOCAL_CONF, stop_on_close=False)
    resource.session()
    yield resource
    resource.stop()


@pytest.fixture
def sq(tmp_path: Path) -> Iterator[Querator]:
    """A SQLite store of the test's own (other processes can share it)."""
    with Querator(f"sqlite:///{tmp_path / 'spark.db'}") as q:
        yield q


@pytest.fixture
def spark_worker(sq: Querator, spark_resource: SparkResource) -> RunWorker:
    """``with spark_worker([fns...]) as worker:`` — a Worker served by a thread."""

    def running(functions: list[Any], **options: Any) -> AbstractContextManager[Worker]:
        options.setdefault("resources", {"spark": spark_resource})
        return serving(Worker(sq, functions, poll_timeout=0.5, concurrency=4, **options))

    return running
