"""What a running host thread is waiting for, read from its innermost Python frames.

The simulator advances virtual time only when no host thread can call the device soon. A thread
blocked in a device call obviously cannot; neither can one that sits in a wait of Python's own
primitives that only another thread can end. This module recognises those waits:

* ``Thread.join`` (with or without a timeout): :data:`JOIN`, with the thread it joins;
* ``Future.result``/``exception`` on a ``ThreadPoolExecutor`` work item: :data:`JOIN`, with the
  thread running the item (the future is done only when that thread gets past it);
* an untimed ``Condition.wait`` not yet notified — ``Event.wait()``, ``Queue.get()``,
  ``Semaphore.acquire()``, ``Barrier.wait()``, ``Future.result()`` and the like:
  :data:`CONDITION` (a notify is the only way out); once notified, :data:`WAKING`;
* a ``ThreadPoolExecutor`` worker idle on an empty work queue: :data:`CONDITION` too (only a
  ``submit`` wakes it).

* a ``Condition.wait`` with a real-time timeout not yet notified — ``q.get(timeout=1)``,
  ``ev.wait(0.2)``: :data:`TIMED`. It may end by itself, and a thread that does something after it (a
  watchdog) must not see its device deadlines expire first; so it is not a wait the simulator may
  count as blocked, only one it need not wait for (it is treated as stalled at once).
Plain locks (``Lock.acquire``, ``with lock:``) and ``SimpleQueue.get`` block in C with no frame of
their own and are not recognised either.

>>> import threading
>>> ev = threading.Event()
>>> t = threading.Thread(target=ev.wait); t.start()
>>> import sys, time
>>> while host_wait(sys._current_frames().get(t.ident), {}, ()) is None: time.sleep(0.001)
>>> host_wait(sys._current_frames()[t.ident], {}, ())
('condition', None)
>>> ev.set(); t.join()
"""

from __future__ import annotations

import sys
import threading

JOIN, CONDITION, TIMED, WAKING = "join", "condition", "timed", "waking"


def _code(fn):
    """The code of ``fn`` itself, under any wrapper (reference.hal.host_join/host_sync wrap some)."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn.__code__


_JOIN_CODES = (_code(threading.Thread.join), _code(threading.Thread._wait_for_tstate_lock))
_CONDITION_WAIT = _code(threading.Condition.wait)


def host_wait(frame, frames: dict, host_threads) -> tuple[str, threading.Thread | None] | None:
    """``(kind, thread)`` for a thread whose innermost Python frame is ``frame`` (``frames`` maps
    idents to innermost frames, for finding who runs a future; ``host_threads`` are the registered
    :class:`~halsim.sim.host.HostThread` records to look among): ``(JOIN, joined)``,
    ``(CONDITION, None)``, ``(TIMED, None)``, ``(WAKING, None)``, or None when it waits for nothing
    recognised."""
    if frame is None:
        return None
    code = frame.f_code
    if code is _CONDITION_WAIT:
        outer = frame.f_back
        joined = _future_thread(outer, frames, host_threads) if outer is not None else None
        if joined is not None:
            return JOIN, joined
        local = frame.f_locals
        waiter = local.get("waiter")
        if waiter is None:
            return None  # not waiting yet
        # Notified: the waiter lock was released — and is held again once the wait took it back
        # (``gotit``), while the wait reacquires the condition's own lock.
        notified = not waiter.locked() or local.get("gotit")
        if local.get("timeout") is not None:
            if outer is not None and (outer.f_globals.get("__name__") or "").startswith("halsim."):
                return None  # the simulator's own polls (a blocked call, the gate): not the program's
            return (WAKING, None) if notified else (TIMED, None)
        return (WAKING, None) if notified else (CONDITION, None)
    if code in _JOIN_CODES:
        target = frame.f_locals.get("self")
        return (JOIN, target) if isinstance(target, threading.Thread) else None
    pool = sys.modules.get("concurrent.futures.thread")
    if pool is not None and code is _code(pool._worker):
        work = frame.f_locals.get("work_queue")
        if work is not None and work.empty():
            return CONDITION, None  # idle: blocked in (or about to block in) work_queue.get()
    return None


# Modules whose frames are the primitive itself, not the program waiting in it; and the wrappers
# reference.hal installs over some of them (whose inner frame names the primitive).
PRIMITIVES = ("threading", "queue", "concurrent.futures")
_WRAPPERS = ("reference.hal.host_join", "reference.hal.host_sync")


def describe(frame, library: tuple[str, ...] = PRIMITIVES) -> str:
    """Where a waiting thread waits, for reports: the outermost call into ``library`` (modules or
    packages, by name) and the program's line that made it, e.g. ``"Queue.get at worker.py:12"``."""
    api, innermost = None, frame
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if module in _WRAPPERS:
            pass
        elif any(module == p or module.startswith(p + ".") for p in library) and \
                not frame.f_code.co_filename.startswith("<"):  # (code compiled from a string is the program's)
            api = frame.f_code.co_qualname
        else:
            break
        frame = frame.f_back
    if frame is None:  # all library (a driver's own thread): where it is, innermost
        if innermost is None:
            return "?"
        return f"{innermost.f_code.co_qualname} at {_file_line(innermost)}"
    where = _file_line(frame)
    return f"{api} at {where}" if api else where


def _file_line(frame) -> str:
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"


def _future_thread(frame, frames: dict, host_threads) -> threading.Thread | None:
    """If ``frame`` is ``Future.result``/``exception``, the host thread running that future's
    ``ThreadPoolExecutor`` work item, if any."""
    futures = sys.modules.get("concurrent.futures._base")
    if futures is None or frame.f_code not in (_code(futures.Future.result), _code(futures.Future.exception)):
        return None
    future = frame.f_locals.get("self")
    pool = sys.modules.get("concurrent.futures.thread")
    if pool is None or future is None:
        return None
    run = _code(pool._WorkItem.run)
    for ht in host_threads:
        f = frames.get(ht.thread.ident)
        while f is not None:
            if f.f_code is run:
                if getattr(f.f_locals.get("self"), "future", None) is future:
                    return ht.thread
                break
            f = f.f_back
    return None
