"""Rate limits enforced in the store, shared by every client of it.

```python
from querator import Querator
from querator.limits import RateLimit, RateLimiter

with Querator("memory://") as q:
    stripe = RateLimiter(q, RateLimit("stripe", 100, per=1.0))
    stripe.acquire("tenant-1")          # waits until a start is admitted
    print(stripe.try_acquire("tenant-1").allowed)
```

See docs/flow-control.md.
"""

from querator.limits.concurrency import Concurrency
from querator.limits.rate import AsyncRateLimiter, RateDecision, RateLimit, RateLimiter

__all__ = ["AsyncRateLimiter", "Concurrency", "RateDecision", "RateLimit", "RateLimiter"]
