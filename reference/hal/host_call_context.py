"""Which queue host call the calling thread is running, if any.

Host buffer accesses (``map_read``, ``map_write``, …) are traced with who made them: a host thread,
or — from inside a host call's function — the host call, which runs after its waits and before its
signals, so the checks order its accesses by the op's semaphores rather than by a thread of its own.

>>> current() is None
True
>>> with running("0:3"):
...     current()
'0:3'
>>> current() is None
True
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

class _State(threading.local):
    op: str | None = None   # a class default: a missing attribute would cost ~0.25 µs per lookup


_state = _State()


def current() -> str | None:
    """The id of the host call whose function this thread is running, or None."""
    return _state.op


@contextmanager
def running(op_id: str):
    """Mark this thread as running host call ``op_id``'s function for the ``with`` block."""
    previous = current()
    _state.op = op_id
    try:
        yield
    finally:
        _state.op = previous
