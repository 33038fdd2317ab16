"""querator: workflows and sagas on a versioned lease queue.

```python
from querator import Querator, Item, QueueSettings
with Querator() as q:                       # ./querator.db (SQLite); or postgresql://…, memory://
    q.create_queue("jobs", QueueSettings(lease_timeout=30))
    q.produce("jobs", [Item(payload=b"hello")])
    [job] = q.lease("jobs", client_id="worker-1", timeout=5)
    q.complete("jobs", [job])
```
"""

from querator.client import AsyncQuerator, Querator
from querator.queue.models import (
    Item,
    Leased,
    PartitionGauges,
    PartitionStats,
    QueueGauges,
    QueueInfo,
    QueueSettings,
    QueueStats,
    Ref,
    StoredItem,
    TransactResult,
)
from querator.tasks import TaskHandle, task
from querator.workflows import (
    Defer,
    RetryPolicy,
    RunHandle,
    SagaFailed,
    Worker,
    gather,
    saga,
    sleep,
    sleep_until,
    step,
    workflow,
)

__all__ = [
    "AsyncQuerator",
    "Defer",
    "Item",
    "Leased",
    "PartitionGauges",
    "PartitionStats",
    "Querator",
    "QueueGauges",
    "QueueInfo",
    "QueueSettings",
    "QueueStats",
    "Ref",
    "RetryPolicy",
    "RunHandle",
    "SagaFailed",
    "StoredItem",
    "TaskHandle",
    "TransactResult",
    "Worker",
    "gather",
    "saga",
    "sleep",
    "sleep_until",
    "step",
    "task",
    "workflow",
]
