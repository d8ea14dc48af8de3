"""The device: the HAL contract's entry point (DESIGN §3, HAL_SEMANTICS §A.4).

:class:`Device` validates every call, turns queue calls into :class:`QueueOp` records, traces them,
and hands them to the driver's :meth:`Device._submit`. A driver supplies only scheduling: when an op
runs (``_submit``), how a host thread blocks (``_host_wait``), the clock (``now``/``sleep``) and shutdown.

>>> from reference import hal
>>> with hal.create_device("local-task") as dev:
...     buf = dev.allocator.allocate_buffer(16)
...     done = dev.create_semaphore()
...     dev.queue_fill([], [(done, 1)], buf, 0, 16, 0xAB, 1)
...     done.wait(1, timeout=5)
...     buf.map_read(0, 4).hex()
'abababab'
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref

from . import host_join, host_sync
from .allocator import Allocator
from .buffer import Buffer, BufferRef, as_ref
from .command_buffer import _INLINE, CommandBuffer, _sequence, check_dispatch
from .constants import (
    MAX_UPDATE_SIZE,
    QUEUE_AFFINITY_ANY,
    WHOLE_BUFFER,
    BufferUsage,
    CommandBufferMode,
    CommandCategory,
    DispatchFlags,
    MemoryAccess,
    MemoryType,
)
from .event import Event
from .executable import Executable
from .host_call_context import current as current_host_call
from .queue_op import QueueOp
from .semaphore import Semaphore, check_payload
from .status import HalError, StatusCode
from .wait import blocking_wait, check_timepoints, check_wait_mode, normalize_timeout
from ..trace import Recorder, Trace


class Device:
    """Base class of every device. Subclasses set ``capabilities`` and implement ``_submit``."""

    capabilities: frozenset = frozenset()
    clock_kind = "monotonic"
    queue_count = 1

    def __init__(self, uri: str, options: dict | None = None):
        self.uri = uri
        self.options = dict(options or {})
        self._counters: dict[str, itertools.count] = {}
        self._threads: dict[int, tuple] = {}  # thread ident → (thread, index): idents are reused
        self._thread_index: dict = weakref.WeakKeyDictionary()   # thread → index (host_join)
        # thread → host edges it received before its first call: ("join", joined) / ("acquire", sync, via)
        self._pending_edges: dict = weakref.WeakKeyDictionary()
        self._sync_ids = itertools.count()  # host_sync ids (reference.hal.host_sync)
        self._op_seq: dict[int, itertools.count] = {}
        self._thread_lock = threading.Lock()
        self._queue_of: dict[int, int] = {}  # queue_affinity → queue index, for masks already checked
        self._closed = False
        self.trace = Trace({"device": uri, "clock": self.clock_kind, "options": _jsonable(self.options)})
        self.recorder = Recorder(self.trace, self.now)
        self.allocator = Allocator(self)
        host_join.watch(self)
        host_sync.install()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.uri!r}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- clock -------------------------------------------------------------------------------------

    def now(self) -> int:
        """Nanoseconds on the device's clock (host CLOCK_MONOTONIC here; virtual on sim devices)."""
        return time.monotonic_ns()

    def sleep(self, seconds: float) -> None:
        """Pause the calling host thread (virtual on sim devices, so host programs stay portable)."""
        seconds = normalize_timeout(seconds, "seconds", finite=True)
        time.sleep(seconds)

    # -- identity ----------------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        counter = self._counters.get(prefix)
        if counter is None:
            counter = self._counters.setdefault(prefix, itertools.count())
        return f"{prefix}{next(counter)}"

    def host_thread(self) -> int:
        """Index of the calling host thread: 0 for the first thread that used this device, then 1, …"""
        entry = self._threads.get(threading.get_ident())
        if entry is not None and entry[0] is threading.current_thread():
            return entry[1]
        thread = threading.current_thread()
        with self._thread_lock:
            index = len(self._op_seq)
            self._threads[threading.get_ident()] = (thread, index)
            self._op_seq[index] = itertools.count()
        self.recorder.track("host", f"host thread {index}")
        self._thread_registered(thread, index)
        return index

    def known_host_thread(self) -> int | None:
        """:meth:`host_thread` if the calling thread already is one of this device's, else None (without
        making it one: the trace notes who touched a buffer's bytes, which must not enrol a thread)."""
        entry = self._threads.get(threading.get_ident())
        # A live thread with the caller's ident is the caller (a dead one's ident may be reused).
        # Not threading.current_thread(): the hand-off wrappers call this from a thread still in
        # Thread._bootstrap_inner (Thread.start's Event.set), for which current_thread() makes a
        # _DummyThread — whose own Event.set came back here, about a hundred levels deep (~1 ms per
        # Thread.start once a device had a thread of the same ident).
        return entry[1] if entry is not None and entry[0].is_alive() else None

    # -- Thread.join (reference.hal.host_join) and hand-offs (reference.hal.host_sync) ------------------

    def _thread_registered(self, thread: threading.Thread, index: int) -> None:
        """``thread`` became host thread ``index``: trace the joins and acquires it made before its
        first call."""
        self._thread_index[thread] = index
        for edge in self._pending_edges.pop(thread, ()):
            if edge[0] == "join":
                self._trace_join(index, edge[1])
            else:
                self._trace_acquire(index, edge[1], edge[2])

    def _joining(self, thread: threading.Thread, timeout: float | None) -> bool:
        """``thread.join(timeout)`` is about to be called: True if this device joined it itself
        (the simulator, for a host call it runs); False: join as usual."""
        return False

    def _host_call_deferred(self, op) -> None:
        """Host call ``op``'s function returned DEFERRED: the program took over signalling its list
        (the simulator names it when a wait for one of those values deadlocks)."""

    def _run_host_function(self, fn, args, context):
        """Call a ``queue_host_call`` function (``fn(args, context)``). A device that runs it on the
        calling host thread inside a device call it serializes releases its lock here (``sim:sync``),
        so threads the function starts or waits for can use the device, as on ``local-sync``."""
        return fn(args, context)

    def _host_joined(self, thread: threading.Thread) -> None:
        """The calling thread's ``thread.join()`` returned with ``thread`` ended: what ``thread`` did
        happens before what the caller does next (``host_join``; the checks' happens-before)."""
        joined = self._thread_index.get(thread)
        if joined is None or self._closed:
            return
        index = self.known_host_thread()
        if index is None:
            self._pending_edges.setdefault(threading.current_thread(), []).append(("join", joined))
        else:
            self._trace_join(index, joined)

    def _trace_join(self, thread: int, joined: int) -> None:
        # Joins of several threads at one instant in the order of the joined threads: a pool's
        # shutdown joins a set of threads, whose order varies from run to run.
        self.trace.emit_sorted_run({"ev": "host_join", "t": self.now(), "thread": thread, "joined": joined},
                                   "joined")

    def _host_release(self, via: str) -> tuple[int, int] | None:
        """The calling thread hands something to another thread (``via``, e.g. "Queue.put"): trace
        the release if it is a host thread of this open device and return its receipt — ``(sync id,
        the releasing thread's time)``, which the receiver presents — else None."""
        index = None if self._closed else self.known_host_thread()
        if index is None:
            return None
        sync = next(self._sync_ids)
        return sync, self._trace_sync(index, "release", sync, via)

    def _host_acquire(self, receipt: tuple[int, int], via: str) -> None:
        """The calling thread received what the release with ``receipt`` handed over."""
        if self._closed:
            return
        index = self.known_host_thread()
        if index is None:
            self._pending_edges.setdefault(threading.current_thread(), []).append(("acquire", receipt, via))
        else:
            self._trace_acquire(index, receipt, via)

    def _trace_acquire(self, thread: int, receipt: tuple[int, int], via: str) -> None:
        self._trace_sync(thread, "acquire", receipt[0], via)

    def _trace_sync(self, thread: int | None, role: str, sync: int, via: str, op: str | None = None) -> int:
        """Trace a ``host_sync`` event (``op``: made inside that host call's function); return its time."""
        t = self.now()
        ev = {"ev": "host_sync", "t": t, "thread": thread, "role": role, "sync": sync, "via": via}
        if op is not None:
            ev["op"] = op
        self.recorder.emit(ev)
        return t

    def _host_call_sync(self, op: str, role: str, receipt: tuple[int, int] | None, via: str):
        """A release (``receipt`` None: returns the new receipt) or acquire made inside host call
        ``op``'s function, traced as the host call's (``op``, ``thread`` null). The base tracing,
        not a subclass's: on the simulator such a function runs in the simulator's own turn."""
        if self._closed:
            return None
        sync = next(self._sync_ids) if receipt is None else receipt[0]
        return sync, Device._trace_sync(self, None, role, sync, via, op)

    def _check_open(self) -> None:
        if self._closed:
            raise HalError(StatusCode.FAILED_PRECONDITION, f"device {self.uri!r} is closed")

    def _watch(self, obj, res_id: str) -> None:
        """Trace the moment the host drops its last reference to ``obj`` (the trace holds only ids)."""
        # The finalizer holds the recorder weakly: the finalizer registry is a global root, and a
        # recorder reaches the device (its clock), which may hold ``obj`` (a stream's last operation):
        # a strong reference kept a closed device, dropped by the host, alive for ever with all its
        # buffers (and ``obj`` with it: it never fired).
        weakref.finalize(obj, _host_released, weakref.ref(self.recorder), res_id).atexit = False

    # -- objects -----------------------------------------------------------------------------------

    def create_semaphore(self, initial_value: int = 0) -> Semaphore:
        self._check_open()
        initial_value = check_payload(initial_value, "initial_value")
        sem = Semaphore(self, self._new_id("s"), initial_value)
        self.recorder.semaphore(sem, initial_value, self.host_thread())
        self._watch(sem, sem.id)
        return sem

    def _new_buffer(self, size, memory_type, usage, access, compat, storage, placement=None, op=None) -> Buffer:
        self._check_open()
        buf = Buffer(self, self._new_id("b"), size, memory_type, usage, access, compat, placement, storage)
        self.recorder.buffer(buf, op)
        self._watch(buf, buf.id)
        return buf

    def create_command_buffer(self, mode=CommandBufferMode.ONE_SHOT, categories=CommandCategory.ANY,
                              binding_capacity: int = 0, queue_affinity: int = QUEUE_AFFINITY_ANY) -> CommandBuffer:
        self._check_open()
        self._queue_index(queue_affinity)
        cb = CommandBuffer(self, self._new_id("c"), mode, categories, binding_capacity, queue_affinity)
        self.recorder.command_buffer(cb)
        self._watch(cb, cb.id)
        return cb

    def create_event(self) -> Event:
        """A HAL event (CB10); UNIMPLEMENTED on a device without the ``events`` capability, as IREE's
        CUDA, HIP and Metal drivers ("event not yet implemented")."""
        self._check_open()
        if "events" not in self.capabilities:
            raise HalError(StatusCode.UNIMPLEMENTED, f"create_event: {self.uri} does not implement HAL events")
        return Event(self, self._new_id("v"))

    def load_executable(self, name: str = "builtin") -> Executable:
        self._check_open()
        if not isinstance(name, str):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"name must be a str, got {type(name).__name__}")
        exe = Executable(self, self._new_id("e"), name)
        self.recorder.executable(exe)
        self._watch(exe, exe.id)
        return exe

    # -- semaphores --------------------------------------------------------------------------------

    # A host call's function signalling (its own signal list, then returning DEFERRED) is the op's
    # signal, as on the simulator: the checks order it after the function's writes.
    def _host_signal(self, sem: Semaphore, value: int) -> None:
        op = current_host_call()
        self._signal_semaphore(sem, value, op if op is not None else f"host:{self.host_thread()}")

    def _host_fail(self, sem: Semaphore, error: HalError) -> None:
        op = current_host_call()
        self._fail_semaphore(sem, error, op if op is not None else f"host:{self.host_thread()}")

    def _signal_semaphore(self, sem: Semaphore, value: int, cause: str) -> None:
        # Recorded once the value is set and before it wakes anyone: a waiter on another thread would
        # otherwise record what it did (its own signals, a host wait) before this signal, and the trace
        # would show effects before their cause (the checks read causality from its order).
        t = self.now()
        sem.advance(value, lambda: self.recorder.signal(sem, value, cause, t))

    def _fail_semaphore(self, sem: Semaphore, error: HalError, cause: str) -> None:
        t = self.now()
        sem.fail_with(error.clone(), lambda: self.recorder.fail(sem, error, cause, t))

    def wait_semaphores(self, mode, timepoints, timeout: float | None = None) -> None:
        """Wait for ALL or ANY of ``[(semaphore, value), ...]``; raise the failure or DEADLINE_EXCEEDED."""
        mode = check_wait_mode(mode)
        tps = check_timepoints(self, timepoints, "timepoints")
        timeout = normalize_timeout(timeout)
        thread = self.host_thread()
        start = self.now()
        call = current_host_call()  # a wait inside a host call's function: the checks order it as the op
        try:
            self._host_wait(mode, tps, timeout)
        except HalError as e:
            self.recorder.host_wait(thread, mode.name.lower(), tps, start, e, call)
            raise
        self.recorder.host_wait(thread, mode.name.lower(), tps, start, None, call)

    def _host_wait(self, mode, timepoints, timeout) -> None:
        blocking_wait(mode, timepoints, timeout)

    # -- queues ------------------------------------------------------------------------------------

    def _queue_index(self, queue_affinity) -> int:
        if type(queue_affinity) is int:  # not bool: True would find the entry of 1
            queue = self._queue_of.get(queue_affinity)
            if queue is not None:
                return queue
        if isinstance(queue_affinity, bool) or not isinstance(queue_affinity, int) or \
                not 0 <= queue_affinity <= QUEUE_AFFINITY_ANY:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"queue_affinity must be a 64-bit mask, got {queue_affinity!r}")
        # Bit i is queue i, the lowest selected bit wins; a mask selecting none of this device's queues
        # (bits beyond them) is hashed onto them by that bit's index modulo the count, and 0 is queue 0:
        # never refused, as IREE's drivers take any mask (HAL_SEMANTICS Q14: "single-queue devices
        # treat every affinity identically"), so a program written for more queues runs on fewer.
        # (Not local-task's own hash, the mask itself modulo the count: 0b110 on 2 queues is queue 1
        # here, queue 0 there — bit i stays queue i.)
        queue = ((queue_affinity & -queue_affinity).bit_length() - 1) % self.queue_count if queue_affinity else 0
        if type(queue_affinity) is int and len(self._queue_of) < 256:
            self._queue_of[queue_affinity] = queue
        return queue

    def _enqueue(self, kind: str, wait, signal, queue_affinity, *, commands=(), buffer=None, host_call=None,
                 resources=(), fields=None, accepted=None) -> QueueOp:
        """Validate and submit one queue operation. ``accepted()``, if given, runs once the call is valid,
        before the submission: on a device whose queue call blocks until the op ran (local-sync),
        after it would be too late (a ONE_SHOT command buffer could be submitted again meanwhile)."""
        if self._closed:
            self._check_open()
        queue = self._queue_of.get(queue_affinity) if type(queue_affinity) is int else None
        if queue is None:
            queue = self._queue_index(queue_affinity)
        wait = check_timepoints(self, wait, "wait")
        signal = check_timepoints(self, signal, "signal")
        thread = self.host_thread()
        op_id = f"{thread}:{next(self._op_seq[thread])}"
        resources = _retained(resources, wait, signal, commands)
        call = current_host_call()
        if call is not None:  # enqueued by a host call's function: the checks order it after that op's waits
            fields = dict(fields or (), call=call)
        op = QueueOp(op_id, kind, queue, thread, wait, signal, commands, buffer, host_call, resources, fields)
        op.enqueue_t = self.now()
        self.recorder.enqueued(op, [r.id for r in resources])  # op and retain
        if accepted is not None:
            accepted()
        self._submit(op)
        return op

    def _submit(self, op: QueueOp) -> None:
        raise NotImplementedError

    def _transfer_commands(self, record) -> tuple:
        """Record transfer commands into a private one-shot command buffer (IREE's queue emulation)."""
        cb = CommandBuffer(self, "", CommandBufferMode.ONE_SHOT, CommandCategory.ANY, 0, QUEUE_AFFINITY_ANY)
        cb.begin()
        record(cb)
        cb.end()
        return cb.resolve(None)

    def queue_execute(self, wait, signal, command_buffer: CommandBuffer | None = None, binding_table=None, *,
                      queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        if command_buffer is None:
            self._enqueue("barrier", wait, signal, queue_affinity)
            return
        if not isinstance(command_buffer, CommandBuffer):
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"command_buffer must be a CommandBuffer or None, got {type(command_buffer).__name__}")
        if command_buffer.device is not self:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"command buffer {command_buffer.id} belongs to another device")
        if int(command_buffer.mode) & _INLINE:  # int(): IntFlag's & costs a microsecond
            wait = check_timepoints(self, wait, "wait")  # (an iterator: is it empty?)
            if wait:
                raise HalError(StatusCode.INVALID_ARGUMENT,
                               f"inline command buffer {command_buffer.id} submitted with a wait list")
        commands = command_buffer.resolve(binding_table)
        fields = command_buffer.submit_fields  # one dict per command buffer (ops only read their fields)
        if fields is None or fields["commands"] != len(commands):
            fields = command_buffer.submit_fields = {"cb": command_buffer.id, "commands": len(commands)}
        self._enqueue("execute", wait, signal, queue_affinity, commands=commands, resources=(command_buffer,),
                      fields=fields, accepted=command_buffer.mark_submitted)

    def queue_barrier(self, wait, signal, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        self._enqueue("barrier", wait, signal, queue_affinity)

    def queue_alloca(self, wait, signal, size: int, memory_type=MemoryType.OPTIMAL_FOR_DEVICE,
                     usage=BufferUsage.DEFAULT, access=MemoryAccess.ALL, *,
                     queue_affinity: int = QUEUE_AFFINITY_ANY) -> Buffer:
        self._check_open()
        queue = self._queue_index(queue_affinity)
        check_timepoints(self, wait, "wait")
        check_timepoints(self, signal, "signal")
        buf = self.allocator.allocate_transient(size, memory_type, usage, access, queue)
        self._enqueue("alloca", wait, signal, 1 << queue, buffer=buf, resources=[buf],
                      fields={"buf": buf.id, "size": buf.byte_length})
        return buf

    def queue_dealloca(self, wait, signal, buffer: Buffer, *, queue_affinity: int = QUEUE_AFFINITY_ANY,
                       prefer_origin: bool = False) -> None:
        if not isinstance(buffer, Buffer):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"buffer must be a Buffer, got {type(buffer).__name__}")
        if buffer.device is not self:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"buffer {buffer.id} belongs to another device")
        if prefer_origin and buffer.root.placement is not None:
            queue_affinity = buffer.root.placement.queue_affinity
        self._enqueue("dealloca", wait, signal, queue_affinity, buffer=buffer.root, resources=[buffer.root],
                      fields={"buf": buffer.id, "transient": buffer.is_transient})

    def queue_fill(self, wait, signal, target: Buffer, offset: int, length: int, pattern: int,
                   pattern_length: int, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        target = _direct(self, target, "target")
        commands = self._transfer_commands(
            lambda cb: cb.fill_buffer(BufferRef(target, offset, length), pattern, pattern_length))
        self._enqueue("fill", wait, signal, queue_affinity, commands=commands)

    def queue_update(self, wait, signal, source, source_offset: int, target: Buffer, target_offset: int,
                     length: int, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        target = _direct(self, target, "target")
        try:
            data = memoryview(source).cast("B")
        except TypeError:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"source must be bytes-like, got {type(source).__name__}") from None
        for name, v in (("source_offset", source_offset), ("target_offset", target_offset), ("length", length)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise HalError(StatusCode.INVALID_ARGUMENT, f"{name} must be an int >= 0, got {v!r}")
        if source_offset > len(data):  # (a WHOLE_BUFFER length would come out negative)
            raise HalError(StatusCode.OUT_OF_RANGE, f"source_offset {source_offset} past source length {len(data)}")
        if length == WHOLE_BUFFER:
            length = len(data) - source_offset
        if source_offset + length > len(data):
            raise HalError(StatusCode.OUT_OF_RANGE,
                           f"source [{source_offset}, {source_offset + length}) past source length {len(data)}")
        data = bytes(data[source_offset:source_offset + length])  # captured now: caller may reuse its memory

        def record(cb):
            for chunk in range(0, length, MAX_UPDATE_SIZE):
                n = min(MAX_UPDATE_SIZE, length - chunk)
                cb.update_buffer(data, chunk, BufferRef(target, target_offset + chunk, n))
        commands = self._transfer_commands(record)
        self._enqueue("update", wait, signal, queue_affinity, commands=commands, fields={"bytes": length})

    def queue_copy(self, wait, signal, source: Buffer, source_offset: int, target: Buffer, target_offset: int,
                   length: int, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        source = _direct(self, source, "source")
        target = _direct(self, target, "target")
        commands = self._transfer_commands(
            lambda cb: cb.copy_buffer(BufferRef(source, source_offset, length), BufferRef(target, target_offset, length)))
        self._enqueue("copy", wait, signal, queue_affinity, commands=commands)

    def queue_dispatch(self, wait, signal, executable: Executable, entry_point, workgroups, constants=(),
                       bindings=(), *, flags=DispatchFlags.NONE, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        checked = check_dispatch(executable, entry_point, workgroups, constants, bindings, flags, self)
        if checked is None:  # no workgroups: a no-op that still waits and signals (Q13), nothing retained
            self._enqueue("dispatch", wait, signal, queue_affinity)
            return
        for i, ref in enumerate(checked[3]):
            if ref.is_indirect:
                raise HalError(StatusCode.INVALID_ARGUMENT, f"bindings[{i}]: queue_dispatch bindings must be direct")

        def record(cb):
            cb.dispatch(executable, entry_point, workgroups, constants, bindings, flags)
        commands = self._transfer_commands(record)
        self._enqueue("dispatch", wait, signal, queue_affinity, commands=commands, resources=[executable])

    def queue_host_call(self, wait, signal, fn, args=(), non_blocking: bool = False, *,
                        queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        if not callable(fn):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"fn must be callable, got {type(fn).__name__}")
        args = _sequence(args, "args")
        self._enqueue("host_call", wait, signal, queue_affinity, host_call=(fn, args, bool(non_blocking)),
                      fields={"non_blocking": bool(non_blocking)})

    def queue_flush(self, *, queue_affinity: int = QUEUE_AFFINITY_ANY) -> None:
        self._check_open()
        self._queue_index(queue_affinity)

    # -- shutdown ----------------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            host_join.unwatch(self)
            self._shutdown()

    def _shutdown(self) -> None:
        pass


def _host_released(recorder_ref, res_id: str) -> None:
    """A watched resource's finalizer (Device._watch): trace its release if the recorder still exists
    (not when the device and the resource are collected together)."""
    recorder = recorder_ref()
    if recorder is not None:
        recorder.host_release(res_id)


def _retained(resources, wait, signal, commands) -> tuple:
    """What an op retains, each object once, in first-reference order: ``resources``, the wait and
    signal semaphores, the buffers the commands access."""
    out = list(resources)
    # Semaphores have identity equality, so ``in`` is an identity test; the lists are short.
    for sem, _ in wait:
        if sem not in out:
            out.append(sem)
    for sem, _ in signal:
        if sem not in out:
            out.append(sem)
    if commands:
        buffers = commands.buffers()  # distinct already
        for r in resources:
            if isinstance(r, Buffer):
                seen = {id(r) for r in resources}
                out.extend(b for b in buffers if id(b) not in seen)
                break
        else:
            out.extend(buffers)
    return tuple(out)


def _direct(device, buffer, what: str) -> Buffer:
    ref = as_ref(buffer, what, device)
    if ref.is_indirect:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a Buffer")
    return ref.buffer


def _jsonable(options: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)) for k, v in options.items()}
