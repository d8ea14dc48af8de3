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
  watchdog) must not see its device deadlines expire first; so the simulator counts it as a virtual
  sleep of that timeout (:func:`timed_wait` gives the wait's identity and timeout): deadlines before
  its end may expire, later ones wait for the thread.
Plain locks (``Lock.acquire()``, ``with lock:``) block in C with no frame of their own: a thread
whose innermost frame sits at such an untimed acquire (read from its bytecode, :func:`lock_wait`) of a
``Lock``/``RLock`` that is held — by another thread — and is seen there again :data:`LOCK_SETTLE_S`
later counts as :data:`CONDITION` too (until 2026-11-25 it counted as stalled, so a timed wait beside
it never expired: a thread waiting with a timeout while holding the lock another host thread needed
hung for ever instead of timing out). ``SimpleQueue.get`` is not recognised.

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

import dis
import sys
import threading
from time import monotonic

from .host_turns import BLOCKED, RUNNING, thread_frames

JOIN, CONDITION, TIMED, WAKING = "join", "condition", "timed", "waking"
NS_PER_S = 1_000_000_000


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
    :class:`~halsim.sim.host_state.HostThread` records to look among): ``(JOIN, joined)``,
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


def timed_wait(frame) -> tuple[object, float] | None:
    """``(waiter, timeout)`` if ``frame`` (a thread's innermost) is a ``Condition.wait`` with a
    real-time timeout (:data:`TIMED`): its waiter lock — one per call, so it tells one wait from the
    next — and the timeout in seconds; None otherwise."""
    if frame is None or frame.f_code is not _CONDITION_WAIT:
        return None
    local = frame.f_locals
    waiter, timeout = local.get("waiter"), local.get("timeout")
    if waiter is None or timeout is None:
        return None
    return waiter, max(0.0, float(timeout))


_THREAD_START = threading.Thread.start.__code__


def _in_thread_start(frame) -> bool:
    """Whether ``frame`` (a Condition.wait) is ``Thread.start`` waiting for the thread it starts."""
    for _ in range(4):  # Condition.wait ← Event.wait (← the hand-off wrapper) ← Thread.start
        if frame is None:
            return False
        if frame.f_code is _THREAD_START:
            return True
        frame = frame.f_back
    return False


_LOCKS = (type(threading.Lock()), type(threading.RLock()))
LOCK_SETTLE_S = 0.05  # real seconds a thread must stay at a held lock's acquire to count as waiting in it
_INSTRUCTIONS: dict = {}  # code object → {offset: index}, its instructions


def _instructions(code):
    found = _INSTRUCTIONS.get(code)
    if found is None:
        if len(_INSTRUCTIONS) > 4096:
            _INSTRUCTIONS.clear()
        ins = list(dis.get_instructions(code))
        found = _INSTRUCTIONS[code] = ({i.offset: n for n, i in enumerate(ins)}, ins)
    return found


def _loaded(frame, ins, end):
    """The object the instructions ``ins[:end]`` leave on the stack top when they end in a plain load
    (a local, cell or global name, then attributes: ``lock``, ``self._lock``); None otherwise."""
    attrs = []
    i = end - 1
    while i >= 0 and ins[i].opname == "LOAD_ATTR":
        attrs.append(ins[i].argval)
        i -= 1
    if i < 0:
        return None
    op, name = ins[i].opname, ins[i].argval
    local = frame.f_locals
    if op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME") and name in local:
        obj = local[name]
    elif op in ("LOAD_GLOBAL", "LOAD_NAME") and name in frame.f_globals:
        obj = frame.f_globals[name]
    else:
        return None
    for a in reversed(attrs):
        try:
            obj = getattr(obj, a)
        except Exception:  # noqa: BLE001 - a property that raises: not a plain load
            return None
    return obj


def lock_wait(frame, ident: int | None = None):
    """The ``Lock``/``RLock`` the thread whose innermost frame is ``frame`` (thread id ``ident``) is
    blocked acquiring, untimed — the frame is at ``lock.acquire()`` (no arguments) or at the
    ``with lock:`` that enters it, and the lock is held (an ``RLock`` by another thread) — or None;
    None too in the simulator's and the reference HAL's own code (the device lock).
    The frame may also have just acquired it (the thread has yet to get the GIL back to go on): a
    caller sees it there again later before it counts it as waiting."""
    if frame is None:
        return None
    module = frame.f_globals.get("__name__") or ""
    if module.startswith(("halsim.", "reference.")):
        return None  # the device's own lock (a thread about to enter a device call): never the program's
    try:
        index, ins = _instructions(frame.f_code)
    except Exception:  # noqa: BLE001 - no bytecode to read
        return None
    n = index.get(frame.f_lasti)
    if n is None:
        return None
    op = ins[n].opname
    if op == "BEFORE_WITH":
        lock = _loaded(frame, ins, n)
    elif op == "CALL" and ins[n].arg == 0 and n >= 2:
        k = n - 2 if ins[n - 1].opname == "PRECALL" else n - 1  # (3.11 has PRECALL; 3.12 does not)
        if ins[k].opname not in ("LOAD_METHOD", "LOAD_ATTR") or ins[k].argval not in ("acquire", "__enter__"):
            return None
        lock = _loaded(frame, ins, k)
    else:
        return None
    if not isinstance(lock, _LOCKS):
        return None
    if isinstance(lock, _LOCKS[0]):
        return lock if lock.locked() else None
    owner = repr(lock).partition("owner=")[2].partition(" ")[0]  # (_thread.RLock has no locked())
    return lock if owner not in ("", "0") and owner != str(ident) else None


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


class PythonWaits:
    """What :class:`~halsim.sim.host.HostThreads` reads of its threads' Python waits (a mixin: it
    uses the threads' records, ``_order``, ``record_of``, ``env`` and ``clock_of``)."""

    def _waiting(self, ht: "HostThread") -> None:
        """``ht`` (running) was seen waiting in a Python primitive: its clock stands still from now
        (time only advances after such a look, so this is its clock when it began to wait)."""
        ht.waited = True
        if ht.frozen is None:
            ht.frozen = self.env._now + ht.lag

    def _timed_until(self, ht: "HostThread", frames: dict) -> int | None:
        """The virtual time the Python wait with a real-time timeout that ``ht`` is in ends: its
        clock when the wait began plus the timeout — or, when it went from one such wait straight
        into another (no device call or traced hand-off between), from the end of the one before
        (it waited that out, or was woken without a hand-off the simulator sees), or as much later
        as the real time it spent since that one was first seen (a loop of short waits seen only
        now and then). None if ``ht`` is not in such a wait itself (it joins a thread that is)."""
        w = timed_wait(frames.get(ht.thread.ident))
        if w is None:
            return None
        waiter, timeout = w
        timed = ht.timed
        if timed is None or timed[0] is not waiter:
            now = monotonic()
            start = self.clock_of(ht)
            if timed is not None:
                _, seen, length = timed
                start = max(start, ht.until - length + max(length, int((now - seen) * NS_PER_S)))
            length = int(round(min(timeout, 2.0**32) * NS_PER_S))
            ht.timed, ht.until = (waiter, now, length), start + length
        return ht.until

    def _quiet(self, thread: threading.Thread, frames: dict, seen: set) -> str | None:
        """Why ``thread`` cannot call the device before another thread acts: "blocked" (in a device
        call), CONDITION (in a Python primitive's wait, :mod:`.host_waits`), JOIN (joining a thread
        that is itself quiet, or a registered one, which is judged on its own); TIMED (in a wait with
        a real-time timeout: not before another thread acts, or the timeout passes); None if it may."""
        ht = self.record_of(thread)
        if ht is not None and ht.state == BLOCKED:
            return BLOCKED
        wait = host_wait(frames.get(thread.ident), frames, self._order)
        if ht is None:
            self._outside_woken(thread, wait, frames.get(thread.ident))
        if wait is None and self._in_lock(thread, frames):
            return CONDITION
        if wait is None or wait[0] == WAKING:
            return None
        kind, target = wait
        if kind == CONDITION or kind == TIMED:
            return kind
        if target is None or not target.is_alive() or target in seen:
            return None  # the join is returning, or joins form a cycle (a Python deadlock)
        seen.add(thread)
        inner = self._quiet(target, frames, seen)
        host = self.record_of(target) is not None
        if inner is not None and not (inner == TIMED and host):
            return inner
        return JOIN if host else None  # (a host thread it joins is judged on its own)

    # outside (unregistered) thread → what it was last seen waiting in: CONDITION or WAKING (None until used)
    _outside: dict | None = None

    def _outside_woken(self, thread: threading.Thread, wait, frame=None) -> None:
        """Note what an outside thread (one that never called the device) waits in. One seen woken
        from a wait only another thread ends — notified (WAKING), or gone from an untimed wait
        (CONDITION) it was last seen in — runs because the program handed it something (a host
        thread's ``Queue.put``, a host call's ``Event.set``...) and may call the device next: it
        counts as a thread just started (``_first_seen``: it holds virtual time back for GRACE_S
        while it runs), even one started before the device (``_known``). (Until 2026-11-25 such a
        thread did not count: a consumer thread started before the device, or one that had waited
        in ``ev.wait(5)`` for GRACE_S, woken by a host call, and the host thread's wait for its
        signal raised DeadlockError before it could signal.) A wait with a real-time timeout that
        ends by itself (a ticker's) is no wake-up, nor is ``Thread.start``'s wait for the thread it
        starts (every harness that runs a program on a thread made it hold time back for GRACE_S)."""
        seen = self._outside
        if seen is None:
            seen = self._outside = {}
        kind = None if wait is None else wait[0]
        if kind == WAKING and _in_thread_start(frame):
            return
        last = seen.get(thread)
        if (kind == WAKING and last != WAKING) or (kind is None and last == CONDITION):
            self._known.discard(thread)
            self._first_seen[thread] = monotonic()
        if kind == CONDITION or kind == WAKING:
            seen[thread] = kind
        elif last is not None:
            del seen[thread]
        if len(seen) > 64:
            self._outside = {t: k for t, k in seen.items() if t.is_alive()}

    # thread → ((frame id, code, instruction offset), real time first seen) of the held lock's acquire it sits at
    _locked: dict | None = None

    def _in_lock(self, thread: threading.Thread, frames: dict) -> bool:
        """Whether ``thread`` waits to acquire a held plain lock (:func:`lock_wait`): it was at that
        acquire already LOCK_SETTLE_S ago (not one that just got the lock and has to take the GIL back)."""
        seen = self._locked
        if seen is None:
            seen = self._locked = {}
        frame = frames.get(thread.ident)
        if lock_wait(frame, thread.ident) is None:
            seen.pop(thread, None)
            return False
        now = monotonic()
        at = seen.get(thread)
        here = (id(frame), frame.f_code, frame.f_lasti)  # (not the frame: it would keep its locals alive)
        if at is None or at[0] != here:
            seen[thread] = (here, now)
            if len(seen) > 64:
                self._locked = {t: v for t, v in seen.items() if t.is_alive()}
            return False
        return now - at[1] >= LOCK_SETTLE_S

    def _host_waits(self) -> tuple[tuple[int, str], ...]:
        """(index, where) of the running registered threads that wait on another host thread."""
        frames = thread_frames()
        return tuple((ht.index, describe(frames.get(ht.thread.ident)))
                     for ht in self._order if ht.state == RUNNING and ht.thread.is_alive()
                     and self._quiet(ht.thread, frames, set()) not in (None, TIMED))
