"""The simulated device: the HAL contract on a SimPy engine in virtual time (DESIGN §5).

:class:`SimDevice` is what every personality shares: the engine (a SimPy environment counting integer
nanoseconds from 0), the cost model, the options, host threads on virtual time (:mod:`.host`), the
semaphore history (:mod:`.history`), blocking host waits and ``sleep``, resource lifetimes
(:mod:`.lifetimes`) and deadlock reports (:mod:`.deadlock`). A personality (``personalities/``)
decides how queue operations are scheduled: it implements ``_submit`` and, when it keeps operations
pending, ``_pending_ops`` and ``_cancel_pending``.

Every device call is serialized by one lock and charges the calling thread's clock with
``host_api_ns`` (queue calls also ``submit_ns``); queries, buffer mapping and command recording are free.

>>> from halsim.sim.driver import driver
>>> dev = driver.create_device("generic", cost_model={"host_api_ns": 0, "submit_ns": 0})
>>> dev.sleep(3600)          # one hour of virtual time, at once
>>> dev.now()
3600000000000
>>> dev.close()
"""

from __future__ import annotations

import functools
import gc
import itertools
import random
import sys
import threading
import time
import weakref
from threading import current_thread, get_ident

import simpy

from reference.hal import Device, HalError, StatusCode, WaitMode
from reference.hal.host_call_context import current as current_host_call
from reference.hal.host_join import _original_join
from reference.hal.queue_op import QueueOp, retire, run_body
from reference.hal.wait import deadline_exceeded, evaluate, normalize_timeout
from reference.utils import gc_tuning

from .cost_model import CostModel
from .faults import parse_faults
from .deadlock import build_report
from .history import SemaphoreHistory, WaitTally
from .host import HostThreads
from .lifetimes import SimRecorder, unretain

MAX_QUEUES = 64
SYNC_LOCK_S = 1.0  # real seconds a traced Queue.put/Event.set... waits for the device lock
SHUTDOWN_ROUNDS = 64  # close: cancel-and-run rounds at most (each cancels what waits; see _shutdown)
JOIN_POLL_S = 0.01  # a host call joining a thread: how often it looks whether the thread waits for the device
OPTIONS = {"queues": 1, "cost_model": None, "seed": 0, "max_concurrency": 4, "retain_resources": True,
           "faults": None, "fault_rate": 0.0}


def to_ns(seconds: float) -> int:
    """Seconds (as normalized by ``normalize_timeout``) to integer virtual nanoseconds."""
    return int(round(seconds * 1_000_000_000))


class _CallDepth(threading.local):
    depth = 0  # nesting of device calls on this thread: only the outermost one registers and charges


def _api(submit: bool = False, cost: bool = True):
    """Make a Device method a serialized device call that registers the caller and charges its clock."""
    def decorate(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            with self._lock:
                local = self._local
                depth = local.depth
                if depth == 0:
                    c = self.cost
                    self.threads.enter(self.host_thread, (c.host_api_ns + (c.submit_ns if submit else 0))
                                       if cost else 0)
                local.depth = depth + 1
                try:
                    return method(self, *args, **kwargs)
                finally:
                    local.depth = depth
        return call
    return decorate


def check_options(options: dict, extra: dict | None = None) -> dict:
    """Validate the sim driver's options (INVALID_ARGUMENT naming the option). ``extra``: a
    personality's own options (name → default); their values must have the default's type, and the
    personality checks their ranges."""
    def integer(name, low, high=None):
        v = options[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
            bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise HalError(StatusCode.INVALID_ARGUMENT, f"option {name}={v!r} must be an int {bound}")
        return v

    integer("queues", 1, MAX_QUEUES)
    integer("max_concurrency", 1)
    if isinstance(options["seed"], bool) or not isinstance(options["seed"], int):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"option seed={options['seed']!r} must be an int")
    if not isinstance(options["retain_resources"], bool):
        raise HalError(StatusCode.INVALID_ARGUMENT,
                       f"option retain_resources={options['retain_resources']!r} must be a bool")
    for name, default in (extra or {}).items():
        v = options[name]
        if type(v) is not type(default) and not (type(default) is float and type(v) is int):
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"option {name}={v!r} must be of type {type(default).__name__}")
    return options


class SimDevice(Device):
    """Base of the simulated devices. Subclasses set ``personality`` and implement ``_schedule(op)``."""

    clock_kind = "virtual"
    personality = ""
    cost_defaults: dict = {}
    extra_options: dict = {}  # the personality's own options (name → default), beyond OPTIONS
    waits_in_list_order = False  # a pending op's waits resolved in list order (deadlock report wording)

    def __init__(self, uri: str, options: dict | None = None):
        options = check_options({**OPTIONS, **self.extra_options, **(options or {})}, self.extra_options)
        self._lock = threading.RLock()
        self._local = _CallDepth()
        self.env = simpy.Environment()
        self.cost = CostModel.from_option(options["cost_model"], CostModel.from_dict(self.cost_defaults))
        self.queue_count = options["queues"]
        self.max_concurrency = options["max_concurrency"]
        self.retain_resources = options["retain_resources"]
        self.rng = random.Random(options["seed"])  # for models with randomness (and fault_rate)
        self.faults = parse_faults(options["faults"], options["fault_rate"])  # None: no fault injection
        self.threads = HostThreads(self.env, self._lock, self._diagnose)
        self.history = self._make_history()
        self.history.bind(self.env, self.threads)  # (bounded: prunes what no wait can ask about any more)
        self.now = self.threads.clock  # what now() returns, without a call in between (it is called a lot)
        self._thread_count = 0
        self._sim_thread: int | None = None
        self._host_call_op: QueueOp | None = None
        # sim:sync: host calls whose function runs on a host thread (op id → op), for deadlock reports
        self._running_calls: dict[str, QueueOp] = {}
        # host calls that returned DEFERRED, with their signal lists (weak: the report only names them)
        self._deferred: list[tuple[str, tuple]] = []
        self._deferred_prune_at = 256
        super().__init__(uri, options)
        self.trace.header["personality"] = self.personality
        self.trace.header["cost_model"] = self.cost.to_dict()
        self.recorder = SimRecorder(self.trace, self.now, self.retain_resources, weakref.ref(self))
        self._gc_hold = gc_tuning.hold(self)  # released at close (or when the device is collected)

    def _make_history(self) -> SemaphoreHistory:
        """The semaphore history the device's waits read (a personality may see signals later)."""
        return SemaphoreHistory(self.cost.wake_ns)

    # -- clock and host threads ---------------------------------------------------------------------

    def now(self) -> int:
        """Virtual nanoseconds: the simulator's time, plus the calling host thread's unblocked work."""
        return self.threads.clock()

    def host_thread(self) -> int:
        """Index of the calling host thread; registering it on its first call (see :mod:`.host`)."""
        threads = self.threads
        ident = get_ident()
        if threads._sim_ident != ident:  # the usual case first: a registered host thread
            ht = threads._by_ident.get(ident)
            if ht is not None and ht.thread is current_thread():
                return ht.index
        if threads.in_sim():  # host calls the simulator runs get their own, deterministic, index
            if self._sim_thread is None:
                self._sim_thread = self._new_thread_index("host calls")
            return self._sim_thread
        ht = threads.current()
        if ht is None:
            with self._lock:
                threads.await_earlier_threads()
                ht = threads.current()
                if ht is None:
                    index = self._new_thread_index(None)
                    ht = threads.register(index)
                    self._thread_registered(ht.thread, index)
        return ht.index

    def known_host_thread(self) -> int | None:
        # Registering a thread makes it take part in virtual time: only look it up.
        if self.threads.in_sim():
            return self._sim_thread
        ht = self.threads.current()
        return ht.index if ht is not None else None

    def _joining(self, thread, timeout) -> bool:
        """``thread.join(timeout)`` called: when the caller is a host call the simulator runs, join here
        (True) — and raise FAILED_PRECONDITION if ``thread`` waits for this device (its lock, which
        the simulator holds, or simulated time, which stands still meanwhile): that join would never
        return. False: not ours, join as usual."""
        if not self.threads.in_sim():
            return False
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while thread.is_alive():
            step = JOIN_POLL_S if deadline is None else max(0.0, min(JOIN_POLL_S, deadline - time.monotonic()))
            _original_join(thread, step)
            if not thread.is_alive() or (deadline is not None and time.monotonic() >= deadline):
                break
            if self._waits_for_device(thread):
                raise HalError(StatusCode.FAILED_PRECONDITION,
                               f"a host call run by the simulator joined thread {thread.name!r}, which waits "
                               "for the device (the simulator is running this host call): return "
                               "StatusCode.DEFERRED and let the thread signal instead")
        return True

    def _waits_for_device(self, thread) -> bool:
        """Whether ``thread`` is blocked in this device: a host thread in a blocking call, or one
        waiting for the device lock (its innermost frame is one of this device's methods)."""
        if self.threads.is_blocked(thread):
            return True
        frame = sys._current_frames().get(thread.ident)
        return frame is not None and frame.f_locals.get("self") is self

    # A thread that receives something from another host thread — joins it, gets its Queue item,
    # sees its Event set — cannot act before the giver did: its clock moves to the giver's clock
    # then, plus the wake latency when it had been waiting (its clock was behind).

    def _trace_join(self, thread: int, joined: int) -> None:
        with self._lock:  # (at the joiner's clock, among the device calls)
            self.threads.gate_current()
            clock = self.threads.clock_at(joined)  # (the joined thread's clock at its end)
            if clock is not None:
                self._received_at(clock)
            super()._trace_join(thread, joined)

    def _host_release(self, via: str):
        receipt = super()._host_release(via)
        self.threads.turns.changed()  # (after the giver's own turn at the gate; no lock: see _trace_sync)
        return receipt

    def _trace_sync(self, thread: int, role: str, sync: int, via: str) -> int:
        # At the calling thread's clock, among the device calls. A put made while holding a lock
        # that a host call the simulator runs (holding the device) waits for must not hang: after
        # SYNC_LOCK_S it is traced without the lock.
        locked = self._lock.acquire(timeout=SYNC_LOCK_S)
        try:
            if locked:
                self.threads.gate_current()
            return super()._trace_sync(thread, role, sync, via)
        finally:
            if locked:
                self._lock.release()

    def _trace_acquire(self, thread: int, receipt: tuple[int, int], via: str) -> None:
        # (the releasing thread's clock at the release; a started thread was not running before it)
        self._received_at(receipt[1], started=via == "Thread.start")
        super()._trace_acquire(thread, receipt, via)

    def _received_at(self, t: int, started: bool = False) -> None:
        self.threads.receive(t, self.cost.wake_ns, started)

    def _new_thread_index(self, name: str | None) -> int:
        index = self._thread_count
        self._thread_count += 1
        self._op_seq[index] = itertools.count()
        self.recorder.track("host", name or f"host thread {index}")
        return index

    def _actor(self):
        if self.threads.in_sim():
            return None
        ht = self.threads.current()
        return ht.index if ht is not None else None

    @_api(cost=False)
    def sleep(self, seconds: float) -> None:
        """Advance the calling thread's virtual time by ``seconds``; the device runs meanwhile."""
        seconds = normalize_timeout(seconds, "seconds", finite=True)
        self._sleep_ns(to_ns(seconds))

    def _sleep_ns(self, ns: int) -> None:
        if ns <= 0:
            return
        if self.threads.in_sim():
            raise HalError(StatusCode.FAILED_PRECONDITION, "a host call run by the simulator cannot sleep; "
                           "return StatusCode.DEFERRED and signal from a host thread instead")
        self.threads.block(self.threads.sleep_block(ns))

    # -- API calls (serialized, charged) -------------------------------------------------------------

    create_semaphore = _api()(Device.create_semaphore)  # (the recorder's host_release forgets its history)

    create_command_buffer = _api()(Device.create_command_buffer)
    create_event = _api()(Device.create_event)
    load_executable = _api()(Device.load_executable)
    _new_buffer = _api()(Device._new_buffer)
    wait_semaphores = _api()(Device.wait_semaphores)
    queue_execute = _api(submit=True)(Device.queue_execute)
    queue_barrier = _api(submit=True)(Device.queue_barrier)
    queue_alloca = _api(submit=True)(Device.queue_alloca)
    queue_dealloca = _api(submit=True)(Device.queue_dealloca)
    queue_fill = _api(submit=True)(Device.queue_fill)
    queue_update = _api(submit=True)(Device.queue_update)
    queue_copy = _api(submit=True)(Device.queue_copy)
    queue_dispatch = _api(submit=True)(Device.queue_dispatch)
    queue_host_call = _api(submit=True)(Device.queue_host_call)
    queue_flush = _api()(Device.queue_flush)
    close = _api(cost=False)(Device.close)

    # -- semaphores ----------------------------------------------------------------------------------

    @_api()
    def _host_signal(self, sem, value: int) -> None:
        op = self._host_call_op if self.threads.in_sim() else None
        self._signal_semaphore(sem, value, op.id if op is not None else f"host:{self.host_thread()}")

    @_api()
    def _host_fail(self, sem, error: HalError) -> None:
        op = self._host_call_op if self.threads.in_sim() else None
        self._fail_semaphore(sem, error, op.id if op is not None else f"host:{self.host_thread()}")

    def _signal_semaphore(self, sem, value: int, cause: str) -> None:
        # The simulator signalling (queue ops) is the usual case: its clock is the engine's.
        t = self.env._now if self.threads._sim_ident == get_ident() else self.now()
        # (Traced after advancing, unlike Device._signal_semaphore: here what a signal wakes is only
        # scheduled, and runs in a later step, so nothing it does can reach the trace first.)
        fresh = sem.failure is None and value > sem.payload
        if fresh:  # recorded before advancing: timepoint callbacks read the history
            self.history.signaled(sem.id, value, t, self._actor())
        try:
            sem.advance(value)
        except HalError:
            if fresh:
                self.history.retract(sem.id)
            raise
        self.recorder.signal(sem, value, cause, t)

    def _fail_semaphore(self, sem, error: HalError, cause: str) -> None:
        t = self.now()
        if sem.failure is None:
            self.history.failed(sem.id, t, self._actor())
        if sem.fail_with(error.clone()):
            self.recorder.fail(sem, error, cause, t)

    def _host_wait(self, mode, timepoints, timeout) -> None:
        timeout_ns = None if timeout is None else to_ns(timeout)
        self.wait_blocking(mode, timepoints, timeout_ns, f"wait_semaphores({mode.name.lower()})")

    def wait_blocking(self, mode: WaitMode, timepoints, timeout_ns: int | None, call: str, op=None) -> None:
        """Block the calling host thread until the wait resolves (virtual time advances meanwhile);
        raise the failure, DEADLINE_EXCEEDED, or a DeadlockError when nothing can resolve it.

        It resolves at the earliest virtual time its condition held as the caller sees it — a value
        reached, or a failure (which dominates) — whatever the real order of the signals: a thread
        whose clock runs ahead may signal one semaphore of the list before (in real time) the device
        signals another one earlier in virtual time (:meth:`_resolution`)."""
        threads = self.threads
        start = self.now()
        deadline = None if timeout_ns is None else start + timeout_ns
        me = self._actor()
        in_sim = threads.in_sim()
        if evaluate(mode, timepoints) is not False:
            t, outcome = self._resolution(mode, timepoints, me, start)
            # Met (or failed) at the call; or every semaphore of the list reached its value or failed
            # (nothing can come earlier); or a host call the simulator runs asks: it sees the state now.
            if t <= start or in_sim or all(s.failure is not None or s.last_value >= v for s, v in timepoints):
                if deadline is not None and t > deadline:
                    threads.move_to(deadline)
                    raise deadline_exceeded(mode, timepoints)
                threads.move_to(t)
                if outcome is not None:
                    raise outcome.clone()
                return
        elif in_sim:
            if deadline == start:  # a poll at the simulator's own time: the state now is the answer
                raise deadline_exceeded(mode, timepoints)
            raise HalError(StatusCode.FAILED_PRECONDITION, "a host call run by the simulator cannot block on "
                           "an unsignaled semaphore; return StatusCode.DEFERRED and signal later instead")
        # A poll (timeout 0) too: the simulation may be behind the caller's clock (it runs ahead by its
        # host work), and what the device does up to that clock decides the answer. So it blocks like
        # any timed wait, with its deadline at its call (HostThreads releases it there, or earlier
        # when the condition holds by then).
        block = threads.new_block(call, mode.name.lower(), tuple(timepoints), deadline, op, start)
        if self._running_calls:
            block.inside = self._running_calls.get(current_host_call())

        def resolved(t, error, final):
            threads.resolve(block, error.clone() if error is not None else None, t, final)

        # (kept up to date as each timepoint fires: O(1) a fire, where re-resolving the list was O(N))
        tally = WaitTally(self.history, mode == WaitMode.ANY, me, block.start, resolved)
        try:
            tally.watch(timepoints)
            outcome = threads.block(block)
        finally:
            tally.cancel()
        if outcome is not None:
            try:
                raise outcome
            finally:
                # The traceback holds this frame: its references to the error (itself, or the block
                # that holds it) were a cycle that kept the caller's frames, and their locals, alive
                # until the cyclic GC.
                outcome = block = tally = None

    def _host_call_deferred(self, op: QueueOp) -> None:
        deferred = self._deferred
        if len(deferred) >= self._deferred_prune_at:  # keep those whose list is not all signaled yet
            deferred[:] = [d for d in deferred if _unsignaled(d[1])]
            self._deferred_prune_at = max(256, 2 * len(deferred))  # (amortized: many still unsignaled)
        deferred.append((op.id, tuple((weakref.ref(sem), sem.id, value) for sem, value in op.signal)))

    def _resolution(self, mode: WaitMode, timepoints, me, start: int) -> tuple[int, HalError | None] | None:
        """``(time, outcome)`` of a wait of host thread ``me`` (None: the device) made at ``start``, from
        the semaphores' history, in virtual-time order: the earliest time from ``start`` on at which
        its condition held as the waiter sees it (:meth:`SemaphoreHistory.effective`) — every value
        reached (ALL) or one (ANY), unless a semaphore of the list had failed by then (the failure
        dominates, the earliest one; its error is the outcome). None if nothing resolves it yet.
        (:class:`WaitTally`'s rule, over the list as it stands.)"""
        if not timepoints:
            return start, None
        tally = WaitTally(self.history, mode == WaitMode.ANY, me, start, None)
        tally.unreached = len(timepoints)
        for i, (sem, value) in enumerate(timepoints):
            tally.note(i, sem, value)
        return tally.resolution()

    # -- queue operations ----------------------------------------------------------------------------

    def _submit(self, op: QueueOp) -> None:
        if not self.retain_resources:
            unretain(op, self.recorder)
        self._schedule(op)

    def _schedule(self, op: QueueOp) -> None:
        raise NotImplementedError

    def _faulted_body(self, op: QueueOp) -> bool:
        """``run_body`` for an op whose body runs outside :func:`~.execution.timed_body` (host calls run
        by a completion handler), with fault injection."""
        if self.faults is not None:
            self.faults.check(self, op, None)
        return run_body(self, op, op.track, self.now)

    def _finish(self, op: QueueOp, error: HalError | None, should_signal: bool) -> HalError | None:
        """Trace the op's end and retire it: release what it retained, then signal or fail. Returns the
        error of a refused signal (the whole signal list failed with it), else None."""
        self.recorder.op_done(op, error)
        return retire(self, op, error, should_signal)

    def _pending_ops(self) -> list[QueueOp]:
        """Operations waiting on semaphores (for deadlock reports)."""
        return []

    def _cancel_pending(self, error: HalError) -> None:
        """Resolve every pending operation's waits with ``error`` (device shutdown)."""

    def _queued_behind(self) -> dict[str, str]:
        """In-order queues: op id → id of the earlier op it cannot start before (for deadlock reports).
        A personality with in-order queues lists its queued ops in ``_pending_ops`` too."""
        return {}

    def _diagnose(self, blocks):
        # The deadlock is certain from the moment the last of the blocked calls was made.
        t = max([self.env.now] + [b.start for b in blocks])
        # every host call running on a host thread (sim:sync), outer ones of nested calls included
        deferred = tuple((op_id, tuple((sem_id, v) for _ref, sem_id, v in signals))
                         for op_id, signals in self._deferred if _unsignaled(signals))
        return build_report(t, blocks, self._pending_ops(), self._queued_behind(),
                            tuple(self._running_calls.values()), deferred, self.waits_in_list_order)

    def _shutdown(self) -> None:
        # Resources the program dropped inside a reference cycle (a frame kept by a traceback...)
        # are released now, in every run: otherwise whether the collector happened to run before the
        # close decided whether the trace has their host_release (determinism). Young generations
        # only: the garbage of the program's end is young, and a full collection costs ~25 ms.
        gc.collect(1)
        # IREE [H]: work in flight completes; operations still waiting are cancelled. Cancelling lets
        # operations behind them go on (which may leave others waiting): rounds until none is left —
        # at most SHUTDOWN_ROUNDS, and none once a round changed nothing.
        crash: Exception | None = None
        left: list[QueueOp] = []
        # Threads blocked in a wait are woken by that work, or by their deadlines (in virtual-time
        # order, up to the close at least), then cancelled: each at its own time, which may lie behind
        # the simulator's once the work ran on (threads.closing).
        closed_at = self.threads.closing = self.now()
        for _ in range(SHUTDOWN_ROUNDS):
            before = left
            self._cancel_pending(HalError(StatusCode.CANCELLED, "queue shutting down"))
            try:
                self.threads.run_until_idle()
            except Exception as e:  # noqa: BLE001 - a model bug: the device still closes (raised below)
                crash = crash or e
            left = self._pending_ops()
            if not left or (left == before and self.env.peek() == float("inf")):
                break
        if left:  # a model bug left them stuck: fail what they signal, so no waiter hangs
            for op in left:
                op.end_t = self.env.now
                self._finish(op, HalError(StatusCode.INTERNAL, f"simulator: operation {op.id} could not "
                                          "complete or be cancelled when the device closed"), False)
        self.threads.release_all(HalError(StatusCode.CANCELLED, f"device {self.uri!r} was closed"), closed_at)
        self._gc_hold()
        if crash is not None:
            message = f"simulator: {type(crash).__name__} while closing device {self.uri!r}: {crash}"
            crash = None
            raise HalError(StatusCode.INTERNAL, message)


def _unsignaled(signals) -> bool:
    """Whether a DEFERRED host call's signal list (``(weakref, id, value)``) still has a live
    semaphore neither at its value nor failed."""
    for ref, _sem_id, value in signals:
        sem = ref()
        if sem is not None and sem.poll(value) is False:
            return True
    return False
