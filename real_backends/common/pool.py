"""A native-event pool with a capacity (IREE's ``iree_hal_cuda_event_pool_t``).

The pool starts with ``capacity`` events. ``acquire`` takes one, or creates one when the pool is empty
(unpooled); ``release`` returns it while the pool has room, else destroys it — "extra events
requested beyond capacity are directly created and destroyed without pooling".

>>> made = []
>>> def create():
...     made.append(len(made) + 1)
...     return made[-1]
>>> pool = EventPool(1, create=create, destroy=lambda h: made.append(-h))
>>> a, b = pool.acquire(), pool.acquire()
>>> (a.pooled, b.pooled, pool.unpooled)
(True, False, 1)
>>> pool.release(a); pool.release(b)
>>> made                       # one preallocated, one created beyond capacity, then destroyed
[1, 2, -2]
"""

from __future__ import annotations

import threading
from typing import Callable, NamedTuple


class Pooled(NamedTuple):
    handle: object
    pooled: bool


class EventPool:
    def __init__(self, capacity: int, create: Callable[[], object], destroy: Callable[[object], None]):
        self.capacity = capacity
        self._create = create
        self._destroy = destroy
        self._lock = threading.Lock()
        self._free = [create() for _ in range(capacity)]
        self.in_use = 0
        self.peak_in_use = 0
        self.unpooled = 0

    def acquire(self) -> Pooled:
        with self._lock:
            self.in_use += 1
            self.peak_in_use = max(self.peak_in_use, self.in_use)
            if self._free:
                return Pooled(self._free.pop(), True)
            self.unpooled += 1
        return Pooled(self._create(), False)

    def release(self, event: Pooled) -> None:
        with self._lock:
            self.in_use -= 1
            if len(self._free) < self.capacity:
                self._free.append(event.handle)
                return
        self._destroy(event.handle)

    def close(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for handle in free:
            self._destroy(handle)
