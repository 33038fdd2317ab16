"""Spark stages as workflow steps (PySpark; needs ``pip install 'querator[spark]'``).

```python
from querator.spark import SparkResource, SparkStage, spark_step

@spark_step(name="etl.clean")
def clean(stage: SparkStage, raw: str) -> int:
    df = stage.spark.read.json(stage.input(raw)).dropDuplicates(["id"])
    df.write.mode("overwrite").parquet(stage.output)   # staging; committed on return
    return df.count()

@workflow(name="etl")
def etl(raw: str, root: str) -> int:
    return clean(raw, output=f"{root}/clean")

Worker(q, [etl, clean], resources={"spark": SparkResource(master="local[*]")}).run()
```

A stage whose job runs on a cluster in cluster mode submits it once per step
call, re-attaching after a retry or a crash::

    job = SparkSubmit("jobs/report.py", [stage.output], jobs_dir="/var/lib/etl/jobs")
    done = stage.submit_once(job.submit, job.wait, cancel=job.cancel)

See docs/spark.md.
"""

from querator.spark.session import (
    DEFAULT_MASTER,
    RESOURCE_KEY,
    SparkResource,
    SparkSettings,
    default_resource,
)
from querator.spark.stage import SparkStage
from querator.spark.step import SparkStepFunction, spark_step, stage_progress
from querator.spark.storage import (
    CommitMarker,
    HadoopStorage,
    LocalStorage,
    UncommittedInput,
    delete_output,
    is_committed,
    is_local_path,
    read_marker,
    staging_path,
    storage_for,
)
from querator.spark.submission import (
    ExternalJobFailed,
    SubmissionMarker,
    read_submission,
    submission_path,
    submission_tag,
)
from querator.spark.submit import JobState, SparkSubmit, SubmittedJob

__all__ = [
    "DEFAULT_MASTER",
    "RESOURCE_KEY",
    "CommitMarker",
    "ExternalJobFailed",
    "HadoopStorage",
    "JobState",
    "LocalStorage",
    "SparkResource",
    "SparkSettings",
    "SparkStage",
    "SparkStepFunction",
    "SparkSubmit",
    "SubmissionMarker",
    "SubmittedJob",
    "UncommittedInput",
    "default_resource",
    "delete_output",
    "is_committed",
    "is_local_path",
    "read_marker",
    "read_submission",
    "spark_step",
    "stage_progress",
    "staging_path",
    "storage_for",
    "submission_path",
    "submission_tag",
]
