"""Spark stages as workflow steps, on a real local[2] session shared by the module."""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from querator import Querator
from querator.spark import (
    CommitMarker,
    HadoopStorage,
    LocalStorage,
    SparkResource,
    delete_output,
    is_committed,
    read_marker,
    staging_path,
    storage_for,
)
from querator.spark.storage import commit, staging_root
from querator.workflows import RunHandle, StepFailed, WorkflowFailed, start
from querator.workflows.inspection import get_run

from .conftest import RunWorker
from .flows import (
    NUMBERS,
    SAGA,
    counts,
    example,
    t_flaky,
    t_flaky_flow,
    t_numbers_flow,
    t_publish_saga,
    t_slow,
    t_slow_flow,
    t_slow_step_timeout,
    t_slow_timeout_flow,
    t_step_timeout_flow,
    t_total_flow,
)


def expected_report() -> list[tuple[str, str, int, int, float]]:
    """The report computed in plain Python from the generated events."""
    seen: dict[str, dict[str, Any]] = {}
    for e in example.generate_events():
        if e["user"] and e["amount"] >= 0:
            seen.setdefault(e["event_id"], e)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in seen.values():
        groups.setdefault((e["day"], e["type"]), []).append(e)
    return [
        (day, kind, len(es), len({e["user"] for e in es}), round(sum(e["amount"] for e in es), 2))
        for (day, kind), es in sorted(groups.items())
    ]


def test_failing_stage_is_retried_per_its_policy(
    sq: Querator, spark_worker: RunWorker, tmp_path: Path
) -> None:
    root = str(tmp_path)
    with spark_worker([t_flaky_flow, t_flaky]):
        assert start(sq, t_flaky_flow, root, 2).result(timeout=60) == 3
        assert counts(root, "flaky") == 3
        assert is_committed(f"{root}/flaky")
        with pytest.raises(WorkflowFailed) as failed:
            start(sq, t_flaky_flow, str(tmp_path / "b"), 5).result(timeout=60)
    assert "flaky stage fails" in str(failed.value)
    assert counts(tmp_path / "b", "flaky") == 3  # max_attempts=3, then it failed for good
    assert not (tmp_path / "b" / "flaky").exists()  # nothing committed


def test_long_stage_keeps_its_lease_and_reports_progress(
    sq: Querator, spark_worker: RunWorker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="querator.spark")
    root = str(tmp_path)
    with spark_worker([t_slow_flow, t_slow]):
        # 4 s of Spark work under a 1.5 s lease: only renewals keep it
        run = start(sq, t_slow_flow, root, 4.0)
        assert run.result(timeout=60) == 2
    assert counts(root, "slow") == 1  # never leased twice
    progress = [r.getMessage() for r in caplog.records if "tasks (" in r.getMessage()]
    assert progress, "no Spark progress was logged"
    assert any("step spark.t.slow: spark job" in line for line in progress)
    # ... and stored as the step's progress (what `querator runs show` prints)
    [stage] = [s for s in get_run(sq, run.run_id).steps if s.step == "spark.t.slow"]
    assert stage.progress is not None
    [*_, last] = stage.progress.progress["spark_stages"]
    assert {"job", "stage", "tasks", "completed"} <= set(last)


def _wait_for(pred: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def _active_jobs(spark_resource: SparkResource) -> list[int]:
    return list(spark_resource.session().sparkContext.statusTracker().getActiveJobsIds())


def test_cancelling_the_run_cancels_its_spark_jobs(
    sq: Querator, spark_worker: RunWorker, spark_resource: SparkResource, tmp_path: Path
) -> None:
    root = str(tmp_path)
    with spark_worker([t_slow_flow, t_slow]):
        run = start(sq, t_slow_flow, root, 60.0)
        _wait_for(lambda: _active_jobs(spark_resource))
        began = time.monotonic()
        assert run.cancel("operator said stop")
        _wait_for(lambda: not _active_jobs(spark_resource), timeout=15)
        took = time.monotonic() - began
        _wait_for(lambda: run.status() == "cancelled", timeout=15)
    assert took < 10, f"Spark jobs ran {took:.2f}s after the cancel"
    print(f"cancel -> spark jobs gone in {took:.3f}s")


def test_workflow_timeout_cancels_the_running_stage(
    sq: Querator, spark_worker: RunWorker, spark_resource: SparkResource, tmp_path: Path
) -> None:
    root = str(tmp_path)
    with spark_worker([t_slow_timeout_flow, t_slow]):
        run = start(sq, t_slow_timeout_flow, root, 60.0)
        _wait_for(lambda: _active_jobs(spark_resource))
        _wait_for(lambda: not _active_jobs(spark_resource), timeout=20)  # deadline at 4 s
        with pytest.raises(WorkflowFailed) as failed:
            run.result(timeout=30)
    assert failed.value.error_type == "WorkflowTimeout"


def test_step_timeout_cancels_the_spark_jobs(
    sq: Querator, spark_worker: RunWorker, spark_resource: SparkResource, tmp_path: Path
) -> None:
    root = str(tmp_path)
    began = time.monotonic()
    with spark_worker([t_step_timeout_flow, t_slow_step_timeout]):
        with pytest.raises(WorkflowFailed) as failed:
            start(sq, t_step_timeout_flow, root, 60.0).result(timeout=30)
        assert not _active_jobs(spark_resource)
    assert time.monotonic() - began < 20
    assert "StepTimeout" in str(failed.value) or isinstance(failed.value.__cause__, StepFailed)


def test_saga_compensation_deletes_the_published_output(
    sq: Querator, spark_worker: RunWorker, tmp_path: Path
) -> None:
    root = str(tmp_path)
    with spark_worker(SAGA):
        run = start(sq, t_publish_saga, root)
        _wait_for(lambda: run.status() in ("compensated", "compensation_failed", "failed"), 60)
    assert run.status() == "compensated"
    assert counts(root, "publish") == 1
    assert (tmp_path / "counts" / "unpublish.log").read_text().split() == ["5"]
    assert not (tmp_path / "published").exists()
    assert RunHandle(sq, run.run_id).status() == "compensated"


def _local_files(path: Path) -> list[str]:
    """The names under ``path`` but Hadoop's checksum files."""
    return sorted(p.name for p in path.iterdir() if not p.name.endswith(".crc"))


def test_hadoop_storage_commit_protocol_on_file_uris(
    spark_resource: SparkResource, tmp_path: Path
) -> None:
    """HadoopStorage through the JVM's Hadoop FileSystem API (``file://`` URIs)."""
    spark = spark_resource.session()
    hs = HadoopStorage(spark)
    final = f"file://{tmp_path}/out"
    assert isinstance(storage_for(final, spark), LocalStorage)  # file: is local by default
    # attempt 1 writes its staging; nothing is committed yet
    first = staging_path(final, 1)
    spark.range(3).write.mode("overwrite").parquet(first)
    assert hs.exists(first) and not hs.exists(final)
    assert not is_committed(final, hs) and not is_committed(first, hs)
    commit(hs, first, final, CommitMarker(step="h", run_id="r1", position=0, attempt=1))
    marker = read_marker(hs, final)
    assert marker is not None and (marker.run_id, marker.attempt) == ("r1", 1)
    assert is_committed(final, hs) and not hs.exists(staging_root(final))
    assert spark.read.parquet(final).count() == 3
    # a re-run: clears the staging area, writes, commits over the committed output
    hs.delete(staging_root(final))
    second = staging_path(final, 2)
    spark.range(5).write.mode("overwrite").parquet(second)
    assert spark.read.parquet(final).count() == 3  # readers still see the first commit
    commit(hs, second, final, CommitMarker(step="h", run_id="r2", position=0, attempt=2))
    marker = read_marker(hs, final)
    assert marker is not None and marker.run_id == "r2"
    assert spark.read.parquet(final).count() == 5
    assert _local_files(tmp_path) == ["out"]  # nothing moved aside is left behind
    # whole-file writes: a temporary file renamed over the old one, none left over
    note = f"file://{tmp_path}/notes/n.json"
    hs.write_text(note, '{"v": 1}')
    hs.write_text(note, '{"v": 2}')
    assert hs.read_text(note) == '{"v": 2}' and _local_files(tmp_path / "notes") == ["n.json"]
    assert hs.read_text(f"file://{tmp_path}/notes/none.json") is None
    # an output written without the protocol is refused as input
    raw = f"file://{tmp_path}/raw"
    spark.range(2).write.parquet(raw)
    assert not is_committed(raw, hs) and read_marker(hs, raw) is None
    assert delete_output(final, hs) and not hs.exists(final)


def test_stages_on_a_hadoop_file_system_commit_through_hadoop_storage(
    sq: Querator, spark_worker: RunWorker, spark_resource: SparkResource, tmp_path: Path
) -> None:
    """Outputs on ``viewfs://`` (a Hadoop file system mounted on a local directory):
    the stages commit through HadoopStorage; an uncommitted input is refused."""
    spark = spark_resource.session()
    authority = f"qtest{secrets.token_hex(4)}"  # its own mount table (file systems are cached)
    mounted = tmp_path / "fs"
    spark._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{authority}.link./data", f"file://{mounted}"
    )
    root = f"viewfs://{authority}/data"
    assert isinstance(storage_for(root, spark), HadoopStorage)
    spark.range(4).write.parquet(f"{root}/raw")  # not written by a stage
    with spark_worker(NUMBERS):
        assert start(sq, t_numbers_flow, root, 10).result(timeout=60) == [10, 11, 55]
        with pytest.raises(WorkflowFailed) as refused:
            start(sq, t_total_flow, f"{root}/raw", f"{root}/b").result(timeout=60)
    assert refused.value.error_type == "StepFailed"
    assert "UncommittedInput" in str(refused.value) and f"{root}/raw" in str(refused.value)
    hs = HadoopStorage(spark)
    for name in ("numbers", "total"):
        assert is_committed(f"{root}/{name}", hs) and (mounted / name / "_COMMITTED").exists()
    marker = read_marker(hs, f"{root}/numbers")
    assert marker is not None and marker.position == 1  # the second call's commit replaced it
    assert _local_files(mounted) == ["numbers", "raw", "total"]


def test_the_local_driver_binds_the_loopback_interface(spark_resource: SparkResource) -> None:
    """Spark would bind the machine's network interface when its host name resolves
    to loopback; querator's local sessions bind and advertise 127.0.0.1."""
    conf = spark_resource.session().sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"
