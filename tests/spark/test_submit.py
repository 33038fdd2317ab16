"""Cluster-mode submissions: a stage submits its Spark job with spark-submit (a real,
detached process) through ``SparkStage.submit_once``; a retried or resumed stage
re-attaches instead of submitting twice. No SparkSession in the workers: these
stages never start one (only the submitted jobs run Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.spark import (
    ExternalJobFailed,
    LocalStorage,
    SparkResource,
    SparkSubmit,
    is_committed,
    read_marker,
    read_submission,
    staging_path,
    submission_tag,
)
from querator.spark.launcher import is_alive, process_start
from querator.spark.submission import SubmissionMarker, write_submission
from querator.workflows import Worker, WorkflowCancelled, start

from .flows import LOCAL_CONF, counts
from .submit_flows import JOB, JOB_CONF, SUBMIT, t_remote_flow
from .test_crash import kill, start_worker

ROWS = 7


def _job_lines(root: Path) -> list[str]:
    path = root / "counts" / "job.log"
    return path.read_text().splitlines() if path.exists() else []


def _rows(path: Path) -> list[tuple[int, int]]:
    import pyarrow.parquet as pq

    return sorted((r["id"], r["twice"]) for r in pq.read_table(str(path)).to_pylist())


def _worker(sq: Querator, resource: SparkResource) -> AbstractContextManager[Worker]:
    return serving(Worker(sq, SUBMIT, poll_timeout=0.5, resources={"spark": resource}))


@pytest.fixture
def idle_resource() -> Iterator[SparkResource]:
    """A worker's Spark resource that these stages must never start."""
    resource = SparkResource(master="local[1]", conf=LOCAL_CONF)
    yield resource
    assert not resource.started, "a submitting stage started a local SparkSession"
    resource.stop()


def test_sigkilled_worker_resumes_by_reattaching_to_the_submitted_job(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'submit.db'}"
    root = tmp_path / "out"
    root.mkdir()
    (root / "job-gate").touch()  # the submitted job waits until the test opens it
    log = tmp_path / "workers.log"
    storage = LocalStorage()
    with Querator(url) as q:
        run = start(q, t_remote_flow, str(root), ROWS)
        first = start_worker(url, log, "submit")
        try:

            def recorded() -> str | None:
                assert first.poll() is None, log.read_text()[-3000:]
                marker = read_submission(storage, str(root / "remote"))
                waiting = (root / "job-waiting").exists()
                return marker.job_id if marker is not None and waiting else None

            job_id = wait_for(recorded, timeout=90, interval=0.1, message="a recorded job")
        finally:
            kill(first)  # after the submission was recorded, before the job finished
        job_pid = int((root / "job-waiting").read_text())
        assert is_alive(job_pid, None), "the submitted job died with the worker"
        second = start_worker(url, log, "submit")
        try:
            # the second worker's attempt (after the lease expired) waits on the same job
            wait_for(lambda: counts(root, "remote") == 2, timeout=60, interval=0.1)
            wait_for(lambda: "re-attaching to job" in log.read_text(), timeout=30)
            assert len(_job_lines(root)) == 1
            (root / "job-gate").unlink()
            result = run.result(timeout=100)
        finally:
            kill(second)
    assert len(_job_lines(root)) == 1, "the job was submitted twice"
    assert _job_lines(root)[0].split()[0] == submission_tag("t.remote", run.run_id, 0)
    assert result["job_id"] == job_id
    assert result["written_to"].endswith("remote._staging/attempt-1")  # the submitter's staging
    pids = {line.split()[0] for line in (root / "counts" / "remote.log").read_text().splitlines()}
    assert len(pids) == 2  # the stage ran in both workers, the job once
    assert is_committed(str(root / "remote"))
    marker = read_marker(storage, str(root / "remote"))
    assert marker is not None and marker.run_id == run.run_id and marker.attempt == 2
    assert _rows(root / "remote") == [(i, 2 * i) for i in range(ROWS)]
    assert not (root / "remote._staging").exists()  # the submission record went with it
    assert len(list((root / "jobs").iterdir())) == 1
    assert "spark: starting a session" not in log.read_text()  # no local driver in the workers


def test_a_failed_job_is_submitted_anew_on_retry(
    sq: Querator, idle_resource: SparkResource, tmp_path: Path
) -> None:
    root = tmp_path
    (root / "fail-jobs").write_text("1")  # the first job exits 3 before starting Spark
    with _worker(sq, idle_resource):
        # 0 rows: the second job writes its output without starting Spark (the rows
        # written by a submitted job are checked by the SIGKILL test above)
        run = start(sq, t_remote_flow, str(root), 0)
        result = run.result(timeout=100)
    jobs = _job_lines(root)
    assert len(jobs) == 2 and jobs[0].split()[0] == jobs[1].split()[0]  # same tag, two jobs
    assert counts(root, "remote") == 2
    job_dirs = sorted((root / "jobs").iterdir())
    assert len(job_dirs) == 2 and result["job_id"] in {str(d) for d in job_dirs}
    failed = next(d for d in job_dirs if str(d) != result["job_id"])
    job = SparkSubmit(JOB, jobs_dir=root / "jobs", conf=JOB_CONF)
    assert job.state(str(failed)) == "failed"
    assert job.state(result["job_id"]) == "succeeded"
    with pytest.raises(ExternalJobFailed, match="exit code 3"):
        job.wait(str(failed))
    assert result["written_to"].endswith("attempt-2")
    assert (root / "remote" / "empty").exists() and is_committed(str(root / "remote"))
    assert not (root / "remote._staging").exists()


def test_a_submission_cut_short_before_its_job_id_was_recorded_is_found_by_its_tag(
    sq: Querator, idle_resource: SparkResource, tmp_path: Path
) -> None:
    """Attempt 1 recorded its intent and submitted, then died before recording the
    job id: the next attempt submits with the same tag and gets the running job."""
    root = tmp_path
    run = start(sq, t_remote_flow, str(root), 0)  # 0 rows: the job skips Spark
    final = str(root / "remote")
    tag, staging = submission_tag("t.remote", run.run_id, 0), staging_path(final, 1)
    intent = SubmissionMarker(
        step="t.remote", run_id=run.run_id, position=0, attempt=1, tag=tag, output=staging
    )
    write_submission(LocalStorage(), final, intent)
    job_id = SparkSubmit(JOB, [staging, str(root), "0"], jobs_dir=root / "jobs").submit(tag)
    with _worker(sq, idle_resource):
        result = run.result(timeout=60)
    assert result == {"job_id": job_id, "tag": tag, "written_to": staging}
    assert len(_job_lines(root)) == 1 and len(list((root / "jobs").iterdir())) == 1
    assert (root / "remote" / "empty").exists() and is_committed(final)


def test_cancelling_the_run_cancels_the_submitted_job(
    sq: Querator, idle_resource: SparkResource, tmp_path: Path
) -> None:
    root = tmp_path
    (root / "job-gate").touch()
    try:
        with _worker(sq, idle_resource):
            run = start(sq, t_remote_flow, str(root), ROWS)
            wait_for((root / "job-waiting").exists, timeout=60, interval=0.05)
            job_pid = int((root / "job-waiting").read_text())
            start_time = (process_start(job_pid) or ("", 0))[1]
            assert run.cancel("operator said stop")
            wait_for(lambda: not is_alive(job_pid, start_time), timeout=15, message="job killed")
            with pytest.raises(WorkflowCancelled):
                run.result(timeout=30)
    finally:
        (root / "job-gate").unlink()
    [job_dir] = (root / "jobs").iterdir()
    assert SparkSubmit(JOB, jobs_dir=root / "jobs").state(str(job_dir)) == "cancelled"
    assert read_submission(LocalStorage(), str(root / "remote")) is None
    assert not (root / "remote").exists()
    assert len(_job_lines(root)) == 1


def test_submit_finds_a_running_job_by_its_tag(tmp_path: Path) -> None:
    """The window between submitting and recording the job id: submitting again with
    the same tag returns the running job; a cancelled one is not reused."""
    root = tmp_path
    (root / "job-gate").touch()
    job = SparkSubmit(JOB, [str(root / "o"), str(root), "1"], jobs_dir=root / "jobs")
    try:
        first = job.submit("querator-run-x-3")
        assert job.state(first) == "running"
        assert job.submit("querator-run-x-3") == first
        assert job.find("querator-run-x-30") is None  # a tag is not a prefix match
        wait_for((root / "job-waiting").exists, timeout=60, interval=0.05)
        job.cancel(first)
        wait_for(lambda: job.state(first) == "cancelled", timeout=15)
        with pytest.raises(ExternalJobFailed, match="cancelled"):
            job.wait(first)
        second = job.submit("querator-run-x-3")
        assert second != first
        job.cancel(second)
        wait_for(lambda: job.state(second) == "cancelled", timeout=15)
    finally:
        (root / "job-gate").unlink()
    assert 1 <= len(_job_lines(root)) <= 2  # the second may be killed before it started
