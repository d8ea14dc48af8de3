"""Python's cyclic garbage collector, tuned while simulated or real-backend devices are open.

A simulation allocates millions of short-lived objects while it holds every pending operation alive,
and with CPython's default thresholds (700, 10, 10) the collector re-traverses all of those pending
operations thousands of times: in ``benchmarks/sim_throughput.py`` that was a third of the run. A real
backend (``real_backends``) holds every operation in flight and its trace the same way, and there a
collection is a pause of the thread that happens to allocate: up to 15 ms inside a queue call, which
made an OpenCL submission's mean cost six times its median. While at least one such device is open
the thresholds are raised to at least (100000, 1000, 100); when the last one is closed (or garbage
collected) the previous thresholds come back. Memory is still
reclaimed by reference counting as usual; only cycle detection runs less often: young cycles are
still found by the first generation's collections, but objects that survive one (mostly operations
in flight, which live until they retire) are not traced again — that second pass cost another 8%
of the benchmark's run.

>>> import gc
>>> before = gc.get_threshold()
>>> release = hold()
>>> gc.get_threshold()[0] >= 100_000
True
>>> release()
>>> gc.get_threshold() == before
True
"""

from __future__ import annotations

import gc
import threading
import weakref

THRESHOLDS = (100_000, 1_000, 100)

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None


def _acquire() -> None:
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_saved, THRESHOLDS)))
        _holders += 1


def _release() -> None:
    global _holders
    with _lock:
        _holders -= 1
        if _holders == 0 and _saved is not None:
            gc.set_threshold(*_saved)


def hold(owner=None):
    """Raise the thresholds until the returned callable is called (or ``owner`` is collected)."""
    _acquire()
    if owner is not None:
        return weakref.finalize(owner, _release)
    done = []

    def release() -> None:
        if not done:
            done.append(True)
            _release()
    return release
