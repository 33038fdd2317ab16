"""Locks and semaphores on leases, shared by every client of a store.

```python
from querator import Querator
from querator.locks import Lock

with Querator("memory://") as q:
    with Lock(q, "nightly-report").acquire(timeout=5) as permit:
        print("held with fencing token", permit.token)
```

A semaphore of N is a queue of N permit items: acquire leases one, holding
renews its lease, release retries it at once. The permit's version is its
fencing token. See docs/flow-control.md.
"""

from querator.locks.listing import Holder, SemaphoreInfo, list_semaphores, list_semaphores_async
from querator.locks.permit import Permit
from querator.locks.semaphore import AsyncAcquire, AsyncLock, AsyncSemaphore
from querator.locks.sync import Acquire, Lock, Semaphore
from querator.locks.waiters import Waiter

__all__ = [
    "Acquire",
    "AsyncAcquire",
    "AsyncLock",
    "AsyncSemaphore",
    "Holder",
    "Lock",
    "Permit",
    "Semaphore",
    "SemaphoreInfo",
    "Waiter",
    "list_semaphores",
    "list_semaphores_async",
]
