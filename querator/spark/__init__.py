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

See docs/spark.md.
"""

from querator.spark.session import (
    DEFAULT_MASTER,
    RESOURCE_KEY,
    SparkResource,
    SparkSettings,
    default_resource,
)
from querator.spark.step import SparkStage, SparkStepFunction, spark_step, stage_progress
from querator.spark.storage import (
    CommitMarker,
    HadoopStorage,
    LocalStorage,
    UncommittedInput,
    delete_output,
    is_committed,
    read_marker,
    staging_path,
    storage_for,
)

__all__ = [
    "DEFAULT_MASTER",
    "RESOURCE_KEY",
    "CommitMarker",
    "HadoopStorage",
    "LocalStorage",
    "SparkResource",
    "SparkSettings",
    "SparkStage",
    "SparkStepFunction",
    "UncommittedInput",
    "default_resource",
    "delete_output",
    "is_committed",
    "read_marker",
    "spark_step",
    "stage_progress",
    "staging_path",
    "storage_for",
]
