"""querator over HTTP: the API served by ``querator serve`` and its clients.

```python
from querator.http import Querator          # the same queue methods as querator.Querator
with Querator("http://127.0.0.1:2319", token=None) as q:
    ...
```
"""

from querator.http.client import AsyncQuerator
from querator.http.sync_client import Querator

__all__ = ["AsyncQuerator", "Querator"]
