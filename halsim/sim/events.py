"""SimPy events the device models are built from.

:class:`WaitsResolved` is a queue operation's wait list as one event: it succeeds, at the virtual
time the device sees the last wait reached, with value None — or, when a wait semaphore fails, with
that failure (HalError) as its value. It is driven by semaphore timepoints, so it works whoever
signals: a host thread (whose clock may run ahead of the simulator: the event then fires at the
signal's virtual time) or another operation.

A failure resolves the list at once by default; with ``settle=True`` it resolves only once *every*
wait has been reached or has failed, with the first failure seen: IREE local-task counts each
resolved timepoint, failed or not, and acts on the last one (``task_queue.c``
``iree_hal_task_queue_wait_resolved``), and a Metal wait command buffer completes once every
``encodeWaitForEvent`` passed (a failed ``MTLSharedEvent`` holds ``FAILURE_VALUE``, which passes).

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic")
>>> s = dev.create_semaphore()
>>> w = WaitsResolved(dev, [(s, 2)])
>>> s.signal(2)                      # host thread 0 signals at its clock, t = 200 ns
>>> dev.threads.run_until_idle()
>>> (w.value, dev.env.now)
(None, 200)
>>> dev.close()
"""

from __future__ import annotations

from collections import deque
from heapq import heappush

import simpy
from simpy.events import NORMAL

from reference.hal import HalError


def _wait_resolved(watcher, error: HalError | None) -> None:
    """One wait of ``watcher`` (a WaitsResolved or Waits: its timepoint callback) was reached
    (``error`` None) or failed: fire it at the failure, or once every wait resolved (``settle``)."""
    if watcher.done:
        return
    history = watcher.device.history
    if error is not None:
        if not watcher.settle:
            now = watcher.device.env._now
            watcher._fire(error, next((history.failure(s.id)[0] for s, _ in watcher.waits if s.failure is error),
                                      now))
            return
        if watcher.error is None:
            watcher.error = error
    watcher._left -= 1
    if watcher._left:
        return
    if watcher.error is None:
        watcher._fire(None, history.ready_at(watcher.waits))
    else:
        watcher._fire(watcher.error, _settled_at(history, watcher.waits, watcher.device.env._now))


def _settled_at(history, waits, now: int) -> int:
    """When the device sees the last of ``waits`` resolved: each reached value's time, or, for a
    wait that failed, its semaphore's failure time."""
    t = 0
    for sem, value in waits:
        if sem.last_value >= value:
            t = max(t, history.reached_at(sem.id, value))
        elif sem.failure is not None:
            t = max(t, history.failure(sem.id)[0])
        else:  # (not expected: every wait resolved)
            t = max(t, now)
    return t


class WaitsResolved(simpy.Event):
    """Every ``(semaphore, value)`` of ``waits`` reached (value None), or one failed (value: the error;
    with ``settle``, once every other wait has been reached or has failed too)."""

    def __init__(self, device, waits, settle: bool = False):
        super().__init__(device.env)
        self.device = device
        self.waits = tuple(waits)
        self.done = False
        self.settle = settle
        self.error: HalError | None = None  # (settle) the first failure seen, while others are unmet
        self._left = len(self.waits)
        self._timepoints = []
        if not self.waits:
            self._fire(None, self.env.now)
            return
        _watch(device, self.waits, self)

    _on_change = _wait_resolved  # (a semaphore timepoint's callback)

    def _fire(self, value, t: int) -> None:
        self.done = True
        for tp in self._timepoints:
            tp.cancel()
        self._timepoints = []
        self._ok = True
        self._value = value
        self.env.schedule(self, NORMAL, max(0, t - self.env.now))

    def cancel(self, error: HalError) -> None:
        """Resolve now with ``error`` unless already resolved (queue shutdown)."""
        if not self.done:
            self._fire(error, self.env.now)

    def unmet(self) -> list:
        """The ``(semaphore, value)`` pairs not reached yet."""
        return [(s, v) for s, v in self.waits if s.poll(v) is not True]


def _watch(device, waits, watcher) -> None:
    """Register ``watcher._on_change`` as a timepoint of each ``(semaphore, value)`` in list order,
    until ``watcher.done``; the pending ones go to ``watcher._timepoints``. A value the semaphore
    reached before a failure that lies later in virtual time counts as reached: a host thread runs
    ahead of the simulation and may have signaled, then failed it, before the simulation got here."""
    on_change, history, now = watcher._on_change, device.history, device.env._now
    for sem, value in waits:
        if sem.failure is not None and history.reached_before_failure(sem, value, now) is not None:
            on_change(None)
            continue
        tp = sem.add_timepoint(value, on_change)
        if watcher.done:
            break
        if tp is not None:
            watcher._timepoints.append(tp)


class Call:
    """A simulator event that only calls ``fn(event)`` (``event.arg``: what it was created with): all
    ``Environment.step`` needs of an event is its ``callbacks`` and ``_ok``. One small object, several
    times cheaper than ``env.timeout(ns)`` plus a callback closure, and scheduled the same way, so
    events keep their order (time, priority, insertion)."""

    __slots__ = ("callbacks", "arg")
    _ok = True

    def __init__(self, fn, arg=None):
        self.callbacks = (fn,)
        self.arg = arg


class Done:
    """A one-shot completion (a native event's) for callbacks only: :meth:`fire` succeeds it and runs
    the callbacks at once, in the current simulator step; ``callbacks`` is None once it has fired.
    ``_value``: what it succeeded with (None, or the HalError its waiters fail with)."""

    __slots__ = ("callbacks", "_value")
    _ok = True

    def __init__(self):
        self.callbacks = []
        self._value = None

    def fire(self, value=None) -> None:
        """Succeed and run the callbacks now, in this simulator step, instead of in a step of its own."""
        self._value = value
        callbacks, self.callbacks = self.callbacks, None
        for callback in callbacks:
            callback(self)


def call_after(env, ns: int, fn, arg=None) -> None:
    """Call ``fn(event)`` (``event.arg`` is ``arg``) when the simulation reaches ``env.now + ns``, as
    a callback of ``env.timeout(ns)`` would be (``env.schedule(event, NORMAL, ns)``, inlined)."""
    heappush(env._queue, (env._now + ns, NORMAL, next(env._eid), Call(fn, arg)))


class Lane:
    """Simulator events that come in nondecreasing time order — one host thread's queue calls,
    arriving at its clock — kept in a deque with only the earliest in the environment's heap, each
    with the insertion number ``env.schedule`` would have given it, so the order of events is the
    same. A host thread submits far ahead of the simulation: 100,000 arrivals in the heap made every
    step dearer. ``fn(arg)`` runs at each one's time."""

    __slots__ = ("env", "fn", "items", "event")

    def __init__(self, env, fn):
        self.env = env
        self.fn = fn
        self.items: deque = deque()  # (time, insertion number, arg), sorted
        self.event = Call(self._next)  # the head's event, reused

    def push(self, t: int, arg) -> None:
        """``fn(arg)`` at time ``t`` (>= now), in insertion order among events at ``t``."""
        env = self.env
        eid = next(env._eid)
        items = self.items
        if not items:
            items.append((t, eid, arg))
            event = self.event
            event.callbacks = (self._next,)
            heappush(env._queue, (t, NORMAL, eid, event))
        elif t >= items[-1][0]:
            items.append((t, eid, arg))
        else:  # earlier than the last one (not expected of a host clock): an event of its own
            heappush(env._queue, (t, NORMAL, eid, Call(self._one, arg)))

    def _next(self, event: Call) -> None:
        items = self.items
        arg = items.popleft()[2]
        if items:
            t, eid, _ = items[0]
            event.callbacks = (self._next,)
            heappush(self.env._queue, (t, NORMAL, eid, event))
        self.fn(arg)

    def _one(self, event: Call) -> None:
        self.fn(event.arg)

    def __len__(self) -> int:
        return len(self.items)


class Waits:
    """A queue operation's wait list, as :class:`WaitsResolved` but without being a SimPy event:
    ``on_resolved(event)`` runs as a simulator event (``event.arg``: this object; ``value``: None
    or the failure) scheduled when (and where, in event order) WaitsResolved would have succeeded —
    at the virtual time the device sees the last wait reached, or when a wait semaphore fails (at
    once, or with ``settle`` once every wait resolved), with that failure."""

    __slots__ = ("device", "op", "waits", "on_resolved", "done", "settle", "error", "_left", "_timepoints",
                 "value")

    def __init__(self, device, op, on_resolved, settle: bool = False):
        self.device = device
        self.op = op
        self.waits = waits = op.wait
        self.on_resolved = on_resolved
        self.done = False
        self.settle = settle
        self.error: HalError | None = None
        self._left = len(waits)
        self._timepoints = []
        _watch(device, waits, self)

    _on_change = _wait_resolved  # (a semaphore timepoint's callback)

    def _fire(self, value, t: int) -> None:
        self.done = True
        if value is not None:  # a failure: the waits not reached yet are withdrawn (else all have run)
            for tp in self._timepoints:
                tp.cancel()
        self._timepoints = None
        self.value = value
        env = self.device.env  # (heappush: env.schedule(event, NORMAL, delay) without the call)
        heappush(env._queue, (max(env._now, t), NORMAL, next(env._eid), Call(self.on_resolved, self)))

    def cancel(self, error: HalError) -> None:
        """Resolve now with ``error`` unless already resolved (queue shutdown)."""
        if not self.done:
            self._fire(error, self.device.env.now)


class Fifo(deque):
    """The items an in-order hardware queue (MTLCommandQueue, CUDA stream, OpenCL queue) runs, oldest
    first, and the wake-up of the SimPy process that runs them: ``push`` appends (waking it if idle);
    ``yield from fifo.head()`` returns the head item once there is one (it stays queued until the process
    pops it, so deadlock reports see it)."""

    def __init__(self, env):
        super().__init__()
        self.env = env
        self._wakeup = None

    def push(self, item) -> None:
        self.append(item)
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    def head(self):
        while not self:
            self._wakeup = self.env.event()
            yield self._wakeup
            self._wakeup = None
        return self[0]
