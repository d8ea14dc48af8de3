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
Waits in C have no frame of their own: a thread whose innermost frame sits at such a call (read from
its bytecode, :func:`c_wait`) that blocks now — an untimed ``lock.acquire()``/``with lock:`` of a
``Lock``/``RLock`` held by another thread, ``SimpleQueue.get()`` of an empty queue, ``os.read`` of an
empty pipe — and is seen there again :data:`LOCK_SETTLE_S` later counts as :data:`CONDITION` too; one
with a real-time timeout (``lock.acquire(timeout=1)``, ``sq.get(timeout=1)``) as :data:`TIMED`; one at
such a call that would return now (the lock is free, an item is there), as :data:`WAKING`. (Until
2026-11-25 these counted as stalled: a timed wait beside them never expired — a thread holding the lock
another host thread needed, or with a worker idle in ``SimpleQueue.get()``, hung instead of timing out
— and a consumer started before the device, woken through one, was not seen woken: the host's wait
for what it signals raised DeadlockError.) A wait in C the program just ended — the lock given to the
waiter, the byte read — looks the same until the thread takes the GIL back (:meth:`PythonWaits._woken_in_c`).

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
import os
import queue
import select
import stat
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
LOCK_SETTLE_S = 0.05  # real seconds a thread must stay at a blocking C call to count as waiting in it
_INSTRUCTIONS: dict = {}  # code object → {offset: index}, its instructions
_NONE = object()  # (a value that could not be read)
_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_CONST")
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD")
# The names of the calls c_wait knows: nothing of a call is evaluated unless its callee ends in one.
_C_WAIT_NAMES = ("acquire", "__enter__", "get", "read")


def _instructions(code):
    found = _INSTRUCTIONS.get(code)
    if found is None:
        if len(_INSTRUCTIONS) > 4096:
            _INSTRUCTIONS.clear()
        ins = list(dis.get_instructions(code))
        found = _INSTRUCTIONS[code] = ({i.offset: n for n, i in enumerate(ins)}, ins)
    return found


def _operand(ins, end) -> int | None:
    """Where the plain load that ``ins[:end]`` ends in starts — a constant, or a local, cell, global or
    builtin name, then attributes (``lock``, ``self._lock``, ``os.read``) — or None if it is no such load."""
    i = end - 1
    while i >= 0 and ins[i].opname in _ATTRS:
        i -= 1
    return i if i >= 0 and ins[i].opname in _LOADS else None


def _value(frame, local: dict, ins, start: int, end: int):
    """The value of the plain load ``ins[start:end]`` (:func:`_operand`) in ``frame``, or _NONE."""
    op, name = ins[start].opname, ins[start].argval
    if op == "LOAD_CONST":
        obj = name
    elif op != "LOAD_GLOBAL" and name in local:
        obj = local[name]
    elif op in ("LOAD_GLOBAL", "LOAD_NAME") and name in frame.f_globals:
        obj = frame.f_globals[name]
    elif op in ("LOAD_GLOBAL", "LOAD_NAME") and name in frame.f_builtins:
        obj = frame.f_builtins[name]
    else:
        return _NONE
    for i in range(start + 1, end):
        try:
            obj = getattr(obj, ins[i].argval)
        except Exception:  # noqa: BLE001 - a property that raises: not a plain load
            return _NONE
    return obj


_CALLS: dict = {}  # (code, offset) → what _parse_call found there (the bytecode does not change)


def _call_at(frame) -> tuple | None:
    """``(function, args, kwargs)`` of the call ``frame`` is in: its instruction is a ``CALL`` whose
    callee (named in _C_WAIT_NAMES) and arguments are all plain loads (:func:`_operand`), or the
    ``BEFORE_WITH`` that enters a plain load's context (``(obj.__enter__, (), {})``); None otherwise."""
    key = (frame.f_code, frame.f_lasti)
    parsed = _CALLS.get(key, _NONE)
    if parsed is _NONE:
        if len(_CALLS) > 4096:
            _CALLS.clear()
        parsed = _CALLS[key] = _parse_call(frame.f_code, frame.f_lasti)
    if parsed is None:
        return None
    ins, spans, names, with_ = parsed
    local = frame.f_locals
    fn, *args = (_value(frame, local, ins, s, e) for s, e in reversed(spans))
    if fn is _NONE or any(a is _NONE for a in args):  # (not `in`: it would call the arguments' __eq__)
        return None
    if with_:
        return getattr(fn, "__enter__", None), (), {}
    split = len(args) - len(names)
    return fn, tuple(args[:split]), dict(zip(names, args[split:]))


def _parse_call(code, lasti) -> tuple | None:
    """The static part of :func:`_call_at` at instruction offset ``lasti`` of ``code``: ``(instructions,
    operand spans last first, keyword names, is a with)``, or None when it is no call it reads."""
    try:
        index, ins = _instructions(code)
    except Exception:  # noqa: BLE001 - no bytecode to read
        return None
    n = index.get(lasti)
    if n is not None and ins[n].opname == "PRECALL" and n + 1 < len(ins) and ins[n + 1].opname == "CALL":
        n += 1  # (3.11's specialized PRECALL of a builtin makes the call itself: a warm frame waits there)
    if n is None or ins[n].opname not in ("CALL", "BEFORE_WITH"):
        return None
    k, names = n - 1, ()
    if ins[n].opname == "CALL":
        if k >= 0 and ins[k].opname == "PRECALL":  # (3.11 has PRECALL; 3.12 does not)
            k -= 1
        if k >= 0 and ins[k].opname == "KW_NAMES":
            names = code.co_consts[ins[k].arg]
            k -= 1
    spans, end = [], k + 1
    for _ in range((ins[n].arg or 0) + 1 if ins[n].opname == "CALL" else 1):  # arguments, last first; callee
        start = _operand(ins, end)
        if start is None:
            return None
        spans.append((start, end))
        end = start
    if ins[n].opname == "CALL" and ins[spans[-1][1] - 1].argval not in _C_WAIT_NAMES:
        return None
    if any(getattr(ins[j], "is_jump_target", False) for j in range(end + 1, n + 1)):
        return None  # (``(a or b).get()``: the load before the call may not be what is called)
    return ins, spans, names, ins[n].opname == "BEFORE_WITH"


def _bind(args: tuple, kwargs: dict, params: tuple, defaults: tuple) -> tuple | None:
    """The values of ``params`` in a call with ``args`` and ``kwargs`` (``defaults`` for the rest);
    None if the call does not fit them."""
    if len(args) > len(params) or any(k not in params for k in kwargs):
        return None
    bound = dict(zip(params, defaults))
    bound.update(zip(params, args))
    bound.update(kwargs)
    return tuple(bound[p] for p in params)


def _wait_timeout(block, timeout, untimed):
    """The timeout of a blocking call's wait: None if untimed (``timeout`` is ``untimed``, or below 0 for a
    lock), its seconds if timed, _NONE if it does not wait (non-blocking, no time, or not a number)."""
    if not block:
        return _NONE
    if timeout is untimed or (untimed == -1 and isinstance(timeout, (int, float)) and timeout < 0):
        return None
    return float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else _NONE


def _lock_held(lock, ident) -> bool:
    """Whether ``lock`` (a Lock/RLock) is held — an RLock by a thread other than ``ident``."""
    if isinstance(lock, _LOCKS[0]):
        return lock.locked()
    owner = repr(lock).partition("owner=")[2].partition(" ")[0]  # (_thread.RLock has no locked())
    return owner not in ("", "0") and owner != str(ident)


def _pipe_empty(fd) -> bool | None:
    """Whether ``os.read(fd)`` waits: ``fd`` is a pipe, in blocking mode, with nothing to read (nor its
    writers gone); None if it is no such pipe."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) or not os.get_blocking(fd):
            return None
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(fd, select.POLLIN)
            return not p.poll(0)
        return not select.select([fd], [], [], 0)[0]
    except (OSError, ValueError, TypeError, OverflowError):
        return None


def c_wait(frame, ident: int | None = None) -> tuple[str, float | None] | None:
    """What the thread whose innermost frame is ``frame`` (thread id ``ident``) waits for in C — where it
    has no frame of its own — read from the call its frame is at (its bytecode): ``(CONDITION, None)``
    at an untimed wait that blocks now — ``lock.acquire()`` or ``with lock:`` of a held ``Lock``/``RLock``
    (an ``RLock`` held by another thread), ``SimpleQueue.get()`` of an empty queue, ``os.read`` of an
    empty pipe; ``(TIMED, s)`` at one with a real-time timeout of ``s`` seconds
    (``lock.acquire(timeout=s)``, ``sq.get(timeout=s)``); ``(WAKING, None)`` at one of these calls that
    would return now (the lock is free, an item or data is there: it was woken, or is returning); None
    otherwise, and in the simulator's and the reference HAL's own code (the device lock).
    The frame may also have just got what it waited for (the thread has yet to take the GIL back to go
    on): a caller sees it there again later before it counts it as waiting."""
    if frame is None:
        return None
    for f in (frame, frame.f_back):  # (the device's own waits: its lock, its turn gate's Condition.wait)
        if f is not None and (f.f_globals.get("__name__") or "").startswith(("halsim.", "reference.")):
            return None  # never the program's (a thread about to enter, or in, a device call)
    call = _call_at(frame)
    if call is None:
        return None
    fn, args, kwargs = call
    target, name = getattr(fn, "__self__", None), getattr(fn, "__name__", None)
    if isinstance(target, _LOCKS) and name in ("acquire", "__enter__"):
        params = _bind(args, kwargs, ("blocking", "timeout"), (True, -1))
        timeout = _NONE if params is None else _wait_timeout(params[0], params[1], -1)
        waits = _lock_held(target, ident)
    elif isinstance(target, queue.SimpleQueue) and name == "get":
        params = _bind(args, kwargs, ("block", "timeout"), (True, None))
        timeout = _NONE if params is None else _wait_timeout(params[0], params[1], None)
        waits = target.empty()
    elif fn is os.read and len(args) == 2 and not kwargs:
        timeout, waits = None, _pipe_empty(args[0])
    else:
        return None
    if timeout is _NONE or waits is None:
        return None
    if not waits:
        return WAKING, None
    return (CONDITION, None) if timeout is None else (TIMED, timeout)


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
        frame = frames.get(ht.thread.ident)
        w = timed_wait(frame) or self._c_timed(ht.thread, frame)
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
        frame = frames.get(thread.ident)
        wait = host_wait(frame, frames, self._order)
        if wait is None:  # perhaps a wait in C (a lock, a SimpleQueue, a pipe)
            kind, settled = self._c_wait(thread, frame)
            if ht is None:
                self._outside_woken(thread, None if kind is None else (kind, None), frame)
            return kind if settled else None
        if ht is None:
            self._outside_woken(thread, wait, frame)
        if wait[0] == WAKING:
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
        from a wait only another thread ends — notified (WAKING; in C: at the call, with what it waits
        for there), or gone from an untimed wait (CONDITION) it was last seen in — runs because the
        program handed it something (a host thread's ``Queue.put``, a host call's ``Event.set``, a
        ``SimpleQueue.put``, a lock's release...) and may call the device next: it
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

    # thread → [(frame id, code, instruction offset), real time first seen there, kind, timeout, token,
    # timeouts passed] of the wait in C it was last seen in (c_wait)
    _c_waits: dict | None = None

    def _c_wait(self, thread: threading.Thread, frame) -> tuple[str | None, bool]:
        """What ``thread`` (innermost frame ``frame``) waits for in C (:func:`c_wait`: CONDITION, TIMED,
        WAKING or None), and whether it was at that call already LOCK_SETTLE_S ago (it is not one that
        just got what it waited for and has to take the GIL back)."""
        seen = self._c_waits
        if seen is None:
            seen = self._c_waits = {}
        wait = c_wait(frame, thread.ident)
        if wait is None or wait[0] == WAKING:
            seen.pop(thread, None)
            return (None if wait is None else WAKING), False
        kind, timeout = wait
        now = monotonic()
        here = (id(frame), frame.f_code, frame.f_lasti)  # (not the frame: it would keep its locals alive)
        at = seen.get(thread)
        if at is None or at[0] != here or at[2] != kind:
            seen[thread] = [here, now, kind, timeout, object(), 0]
            if len(seen) > 64:
                self._c_waits = {t: v for t, v in seen.items() if t.is_alive()}
            return kind, False
        if kind == TIMED:  # still there after its timeout: a loop of such waits; this is the next one
            passed = int((now - at[1]) / timeout)
            if passed != at[5]:
                at[4], at[5] = object(), passed
        return kind, now - at[1] >= LOCK_SETTLE_S

    def _c_entry(self, thread: threading.Thread, frame) -> list | None:
        """``thread``'s record in ``_c_waits`` if it is at that wait in C still (``frame``, its innermost)."""
        at = (self._c_waits or {}).get(thread)
        if at is None or frame is None or at[0] != (id(frame), frame.f_code, frame.f_lasti):
            return None
        return at

    def _c_timed(self, thread: threading.Thread, frame) -> tuple[object, float] | None:
        """Like :func:`timed_wait`, for the TIMED wait in C ``thread`` is in at ``frame`` (:meth:`_c_wait`):
        a token for that wait (a new one each time its timeout passes) and its timeout."""
        at = self._c_entry(thread, frame)
        return None if at is None or at[2] != TIMED else (at[4], at[3])

    # real time of the program's last action (a host thread's device call, a host call's function run)
    _acted = float("-inf")

    def _woken_in_c(self, thread: threading.Thread, frames: dict, now: float) -> bool:
        """Whether ``thread``, at a wait in C, may have been woken by the program's last action, LOCK_SETTLE_S
        ago or less: the lock it waits for may have been released to it, or the data it reads written,
        and it is only waiting for the GIL to go on — which looks the same (until then it holds the
        deadlines back, and deadlock reports, as a stalled thread: until 2026-11-25 a consumer woken
        through a pipe or a lock by a host call was taken for still waiting, a false deadlock)."""
        return now - self._acted < LOCK_SETTLE_S and self._c_entry(thread, frames.get(thread.ident)) is not None

    def _host_waits(self) -> tuple[tuple[int, str], ...]:
        """(index, where) of the running registered threads that wait on another host thread."""
        frames = thread_frames()
        return tuple((ht.index, describe(frames.get(ht.thread.ident)))
                     for ht in self._order if ht.state == RUNNING and ht.thread.is_alive()
                     and self._quiet(ht.thread, frames, set()) not in (None, TIMED))
