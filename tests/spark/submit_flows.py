"""A stage that submits its Spark job with ``spark-submit`` (the driver is not the
worker, as in cluster mode) through ``SparkStage.submit_once``."""

from __future__ import annotations

from pathlib import Path

from querator.spark import SparkStage, SparkSubmit, spark_step
from querator.workflows import workflow

from .flows import FAST, Flows, note

JOB = Path(__file__).resolve().parent / "submitted_job.py"
JOB_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "512m",
    "spark.sql.shuffle.partitions": "1",
}


@spark_step(name="t.remote", retry=FAST, lease_timeout=3.0)
def t_remote(stage: SparkStage, root: str, rows: int) -> dict[str, str]:
    """Runs ``submitted_job.py`` once per step call, writing ``rows`` rows to the output."""
    note(root, "remote", stage)
    assert stage.output is not None
    job = SparkSubmit(JOB, [stage.output, root, str(rows)], jobs_dir=f"{root}/jobs", conf=JOB_CONF)
    done = stage.submit_once(job.submit, job.wait, cancel=job.cancel)
    return {"job_id": done.job_id, "tag": done.tag, "written_to": stage.output}


@workflow(name="t.remote_flow")
def t_remote_flow(root: str, rows: int) -> dict[str, str]:
    return t_remote(root, rows, output=f"{root}/remote")


SUBMIT: Flows = [t_remote_flow, t_remote]
