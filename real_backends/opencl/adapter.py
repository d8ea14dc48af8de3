"""OpenCL through pyopencl: in-order command queues as streams, markers and user events as native events.

* Each HAL queue is an in-order ``cl.CommandQueue`` with profiling. A stream wait adds the event to
  the wait list of the next thing enqueued on that queue.
* Buffers: a buffer's bytes (the reference ``Buffer`` storage) are wrapped once per allocation as a
  ``CL_MEM_USE_HOST_PTR`` buffer, so host mapping and the device see the same memory (PoCL's CPU
  device uses the host pointer; :func:`check_coherent` verifies it when the device is created).
* Commands: fill → ``clEnqueueFillBuffer``; update → a write from the bytes captured at record
  time; copy → ``clEnqueueCopyBuffer`` (staged through a temporary device buffer when the ranges
  overlap — binding-table slots aliasing one buffer — which OpenCL forbids); dispatch → the builtin
  library's OpenCL C kernels (``kernel_abi``), built once per context; barriers and HAL events need
  nothing on an in-order queue.
* Native events: a device-signal event is a marker (``clEnqueueMarkerWithWaitList``); unresolved
  waits become user events (``clCreateUserEvent``) set by the engine; no pool.
* Timestamps: profiling counters (PoCL: ``CLOCK_MONOTONIC_RAW``) shifted onto the host's
  ``CLOCK_MONOTONIC`` by an offset measured at creation.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import NamedTuple

import numpy as np

from reference.hal import HalError, Range, StatusCode
from reference.kernels import work_items

from ..common.engine import Adapter, Backoff, WaitFailed
from ..common.kernel_abi import LIBRARY, launch_arguments, source, symbol

PLATFORM = "Portable Computing Language"
_PATTERN_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise HalError(StatusCode.UNAVAILABLE, f"opencl: pyopencl is not installed ({e}); install the 'opencl' "
                       "extra: pip install -e '.[opencl]'") from None
    return cl


def cache_dir() -> str:
    """PoCL's kernel cache inside the project's cache directory (``POCL_CACHE_DIR``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "halsim", "pocl")


_PROBE = "__kernel void halsim_probe(__global int *a) { a[get_global_id(0)] = 1; }"
_usable: dict[int, str | None] = {}  # int_ptr of a cl_device → None (builds kernels) or why not


def _builds_kernels(cl, device) -> str | None:
    """None when ``device`` compiles OpenCL C, else the compiler's complaint (once per process).

    PoCL 3.0 from PyPI (LLVM 14) does not know CPUs newer than its LLVM (AMD Zen 5 among them): it
    names the CPU "generic", which its own clang front end rejects for x86-64, and every build fails
    with "unknown target CPU 'generic'". A second PoCL (Debian's ``pocl-opencl-icd``, which ``make``
    installs where needed) then takes over."""
    key = device.int_ptr
    if key not in _usable:
        try:
            cl.Program(cl.Context([device]), _PROBE).build()
            _usable[key] = None
        except cl.Error as e:
            lines = [ln.strip() for ln in str(e).splitlines() if "error" in ln.lower()]
            _usable[key] = (lines[-1] if lines else str(e).splitlines()[0])[:200]
    return _usable[key]


def find_device(platform_name: str):
    """The first device that builds OpenCL C, of the platforms whose name contains ``platform_name``
    (never by index), in the loader's order; UNAVAILABLE, naming each device's failure, if none."""
    os.environ.setdefault("POCL_CACHE_DIR", cache_dir())
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        raise HalError(StatusCode.UNAVAILABLE, f"opencl: no OpenCL platform ({e})") from None
    names = [p.name for p in platforms]
    failures = []
    for p in platforms:
        if platform_name.lower() in p.name.lower():
            for device in p.get_devices():
                why = _builds_kernels(cl, device)
                if why is None:
                    return device
                failures.append(f"{device.name} ({p.version.strip()}): {why}")
    if failures:
        raise HalError(StatusCode.UNAVAILABLE, "opencl: no device of a platform named like "
                       f"{platform_name!r} can build kernels: " + "; ".join(failures) +
                       " (on Debian: apt-get install pocl-opencl-icd)")
    raise HalError(StatusCode.UNAVAILABLE, f"opencl: no platform named like {platform_name!r} (found: "
                   f"{', '.join(names) or 'none'})")


class OpenCLAdapter(Adapter):
    personality = "opencl"
    stream_name = "in-order queue"
    wait_policy = "user_event"
    max_wait_events = None
    pooled = False
    inline_issue = True  # enqueues never block

    def __init__(self, cl_device, queues: int):
        cl = self.cl = _cl()
        self.cl_device = cl_device
        self.context = cl.Context([cl_device])
        props = cl.command_queue_properties.PROFILING_ENABLE
        self.queues = [cl.CommandQueue(self.context, cl_device, properties=props) for _ in range(queues)]
        self._waits: list[list] = [[] for _ in range(queues)]
        self._tail: list = [None] * queues    # each queue's last enqueued command's event
        self._last: list = [None] * queues    # the same, kept across waits (close waits for it)
        # id(allocation) → (storage, cl.Buffer): dropped when the allocation is garbage (a finalizer)
        # or a dealloca decommitted it (forget); enqueued work keeps its entries (Action.keep).
        self._buffers: dict[int, tuple] = {}
        # Failed actions' native events, until close: PoCL's notify lists point at an event (no
        # reference taken) until the events it waits on completed — a user event set later, a marker
        # of another queue. A command failed through its queue's failed predecessor would otherwise be
        # freed first, and setting its user event then locked a destroyed mutex (SIGABRT in
        # pocl_lock_events_inorder).
        self._parked: list = []
        self.program = cl.Program(self.context, source("cl")).build()
        # Every entry point's cl_kernel now, as IREE resolves every export when it creates an
        # executable: created lazily, PoCL's clCreateKernel made the first dispatch of each entry
        # 0.3-0.6 ms slower than the next (benchmarks/calibration, docs/accuracy.md).
        self.kernels = {k.name: getattr(self.program, symbol(k.name)) for k in LIBRARY}
        self._user_lock = threading.Lock()
        self._start, self._end = cl.profiling_info.START, cl.profiling_info.END
        self.offset_ns = _clock_offset(cl, self.queues[0])
        check_coherent(self)

    # -- events ------------------------------------------------------------------------------------------

    def create_user_event(self):
        return self.cl.UserEvent(self.context)

    def set_user_event(self, handle, error) -> None:
        status = self.cl.command_execution_status.COMPLETE if error is None else -1
        with self._user_lock:
            handle.set_status(status)

    def _wait_list(self, stream: int):
        """The stream's pending waits for the next enqueue, checked under ``_user_lock`` (held by the
        caller through the enqueue): PoCL never runs a command enqueued behind an already-failed user
        event (it stays QUEUED), so such work fails here instead of hanging its waiters."""
        waits = self._waits[stream]
        for w in waits:
            if w.command_execution_status < 0:
                self._waits[stream] = []
                raise WaitFailed(StatusCode.ABORTED, "opencl: an event this work waits on failed")
        return waits or None

    def stream_wait(self, stream: int, handle) -> None:
        self._waits[stream].append(handle)
        self._tail[stream] = None  # the next signal event must come after the wait

    def record(self, stream: int, handle):
        with self._user_lock:
            # On an in-order queue the last command's own event completes after everything enqueued
            # before it: it serves as the signal event unless a wait came after it (a marker then).
            tail = self._tail[stream]
            if tail is not None and not self._waits[stream]:
                return tail
            marker = self._tail[stream] = self._last[stream] = self.cl.enqueue_marker(
                self.queues[stream], wait_for=self._wait_list(stream))
            self._waits[stream] = []
        return marker

    def query(self, handle):
        status = handle.command_execution_status
        if status > 0:
            return False
        return True if status == 0 else HalError(StatusCode.ABORTED, f"opencl: command failed with status {status}")

    def synchronize(self, handle, backlog: int = 0) -> HalError | None:
        # The event's status, polled: not clWaitForEvents, nor a completion callback alone, since PoCL
        # neither returns from a wait on nor calls back for an event that failed through its wait list
        # (a user event set to a negative status); and pyopencl's callbacks, delivered on a thread of
        # their own, took up to 5.8 ms to get the interpreter lock for a command long complete.
        # Paced by Backoff: the last work in flight is looked at closely; behind a backlog, or while a
        # host thread helps (Engine.help: a host round trip), it is polled 50-200 us apart.
        pace = Backoff(spin=not backlog)
        while True:
            state = self.query(handle)
            if state is not False:
                return None if state is True else state
            pace.wait()

    # -- work ------------------------------------------------------------------------------------------

    def _buffer(self, rng: Range, what: str, keep):
        root = rng.buffer.root
        store = root.storage(what)
        key = id(root)
        entry = self._buffers.get(key)
        if entry is None or entry[0] is not store:
            array = np.frombuffer(store, dtype=np.uint8)
            flags = self.cl.mem_flags.READ_WRITE | self.cl.mem_flags.USE_HOST_PTR
            entry = self._buffers[key] = (store, self.cl.Buffer(self.context, flags, hostbuf=array))
            weakref.finalize(root, self._buffers.pop, key, None).atexit = False
        if keep is not None:
            keep.append(entry)  # the host bytes stay while a command may use them
        return entry[1]

    def forget(self, buffer) -> None:
        entry = self._buffers.get(id(buffer.root))
        if entry is not None:
            try:
                buffer.storage()
            except HalError:  # decommitted: work in flight keeps its entry (Action.keep)
                self._buffers.pop(id(buffer.root), None)

    def park(self, action) -> None:
        self._parked.append((action.native, action.last))

    @staticmethod
    def holds(op) -> bool:
        # An indirect dispatch's counts are read on the host when it is enqueued: only once its waits
        # are reached and its queue completed everything before it (never at submission, behind
        # user events; never blocking an issuing thread on the device).
        for cmd in op.commands:
            if cmd.kind == "dispatch" and isinstance(cmd.args[1], Range):
                return True
        return False

    def submit(self, stream: int, action):
        with self._user_lock:
            return self._submit(stream, action)

    def _submit(self, stream: int, action):
        """Enqueue the op's commands from ``action.resume``; return the index of an indirect dispatch
        that follows commands enqueued here (the engine resumes there once they completed), or None."""
        cl, q = self.cl, self.queues[stream]
        commands = action.op.commands
        start, keep = action.resume, action.keep
        enqueued = False
        for position in range(start, len(commands)):
            cmd = commands[position]
            kind = cmd.kind
            wait = self._wait_list(stream)  # consumed by the first command actually enqueued
            if kind == "fill":
                target = cmd.accesses[0][0]
                if target.length == 0:
                    continue
                ev = self._fill(q, self._buffer(target, "fill target", keep), bytes(cmd.args), target, wait, keep)
            elif kind == "update":
                target = cmd.accesses[0][0]
                data = np.frombuffer(bytes(cmd.args), dtype=np.uint8)
                ev = cl.enqueue_copy(q, self._buffer(target, "update target", keep), data, dst_offset=target.offset,
                                     wait_for=wait, is_blocking=False)
            elif kind == "copy":
                src, dst = cmd.accesses[0][0], cmd.accesses[1][0]
                if src.length == 0:
                    continue
                a, b = self._buffer(src, "copy source", keep), self._buffer(dst, "copy target", keep)
                if src.buffer is dst.buffer and src.offset < dst.offset + dst.length and \
                        dst.offset < src.offset + src.length:
                    ev = self._staged_copy(q, a, src, b, dst, wait)
                else:
                    ev = cl.enqueue_copy(q, b, a, byte_count=src.length, src_offset=src.offset,
                                         dst_offset=dst.offset, wait_for=wait)
            elif kind == "dispatch":
                if enqueued and isinstance(cmd.args[1], Range):
                    action.resume = position  # its counts may be what the commands before it write
                    return position
                ev = self._dispatch(q, cmd, wait, keep)
                if ev is None:
                    continue
            else:  # barrier, signal/reset/wait events: an in-order queue already orders everything
                continue
            enqueued = True
            self._waits[stream] = []
            self._tail[stream] = self._last[stream] = ev.last if isinstance(ev, _Staged) else ev
            action.native.append((cmd.index, ev))
        return None

    def _fill(self, q, buf, pattern: bytes, target: Range, wait, keep):
        """A fill; clEnqueueFillBuffer needs its offset (in the allocation) and size to be multiples of
        the pattern's: a range that starts elsewhere — a subspan or a binding starting at an odd byte,
        which the HAL allows (CB13 checks the reference's own offset) — is written as the bytes up to
        the next multiple, a fill with the pattern rotated to start there, and the bytes after the
        last whole pattern (in order on the in-order queue: one command, as a staged copy)."""
        cl, k, offset, length = self.cl, len(pattern), target.offset, target.length
        if offset % k == 0 and length % k == 0:
            return cl.enqueue_fill_buffer(q, buf, np.frombuffer(pattern, _PATTERN_DTYPES[k]), offset, length,
                                          wait_for=wait)
        head = min((-offset) % k, length)
        body = (length - head) // k * k
        events = []
        for start, size, fill in ((0, head, False), (head, body, True), (head + body, length - head - body, False)):
            if not size:
                continue
            rotated = pattern[start % k:] + pattern[:start % k]
            if fill:
                ev = cl.enqueue_fill_buffer(q, buf, np.frombuffer(rotated, _PATTERN_DTYPES[k]), offset + start,
                                            size, wait_for=wait if not events else None)
            else:
                data = np.frombuffer((rotated * (size // k + 1))[:size], np.uint8)
                if keep is not None:
                    keep.append(data)
                ev = cl.enqueue_copy(q, buf, data, dst_offset=offset + start, is_blocking=False,
                                     wait_for=wait if not events else None)
            events.append(ev)
        return events[0] if len(events) == 1 else _Staged(events[0], events[-1], None)

    def _staged_copy(self, q, a, src: Range, b, dst: Range, wait) -> "_Staged":
        """A copy between overlapping ranges of one buffer (which clEnqueueCopyBuffer refuses with
        CL_MEM_COPY_OVERLAP): source → a temporary buffer → target, one after the other on the in-order
        queue, so the target gets the source's bytes as they were before the copy (memmove)."""
        cl = self.cl
        temp = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=src.length)
        first = cl.enqueue_copy(q, temp, a, byte_count=src.length, src_offset=src.offset, dst_offset=0,
                                wait_for=wait)
        last = cl.enqueue_copy(q, b, temp, byte_count=src.length, src_offset=0, dst_offset=dst.offset)
        return _Staged(first, last, temp)

    def _dispatch(self, q, cmd, wait, keep=None):
        spec, workgroups, constants, bindings = cmd.args
        if isinstance(workgroups, Range):
            # Indirect: the engine issues it only once its waits were reached on the host and its
            # queue completed everything before it (holds), this op's earlier commands included
            # (_submit returns before it): the counts in memory are those it executes with.
            workgroups = tuple(np.frombuffer(bytes(workgroups.view("dispatch workgroups")), np.uint32)[:3])
            if 0 in workgroups:
                return None
        n = work_items(spec, workgroups, constants, [b.length for b in bindings])
        if n <= 0:
            return None
        kernel = self.kernels[spec.name]
        kernel.set_args(*kernel_args(spec, [self._buffer(b, f"{spec.name} binding", keep) for b in bindings],
                                     [b.offset for b in bindings], constants, n))
        return self.cl.enqueue_nd_range_kernel(q, kernel, (n,), None, wait_for=wait)

    def timing(self, action):
        events = [(i, ev) for i, ev in action.native if i != "completion"]
        if not events:
            return None
        off, start, end = self.offset_ns, self._start, self._end
        info = self.cl.Event.get_profiling_info  # not ev.profile.start: that is ~15x dearer
        cmds = [(i, info(ev.first, start) + off, info(ev.last, end) + off) if isinstance(ev, _Staged) else
                (i, info(ev, start) + off, info(ev, end) + off) for i, ev in events]
        return cmds[0][1], cmds[-1][2], cmds

    def reached_at(self, action):
        # The signal event's end: a marker's, or the last command's before it on this in-order
        # queue (Adapter.record's reuse), which is when the queue got past everything before the op —
        # but not before the op was issued: a reused command may have ended before then (the op's
        # waits met on the host, by operations that ended later).
        try:
            end = self.cl.Event.get_profiling_info(action.last, self._end) + self.offset_ns
        except self.cl.Error:
            return None
        return end if action.issued_t is None else max(end, action.issued_t)

    def close(self, timeout: float = 5.0) -> None:
        """The engine waited for everything in flight and set every user event: wait until each queue's
        last command is done (PoCL finishes failing a chain on its own threads), then drop the parked
        events and the buffers. Past ``timeout`` they are left (leaked) rather than freed under PoCL."""
        deadline = time.monotonic() + timeout
        pace = Backoff(spin=False)
        for ev in self._last:
            while ev is not None and ev.command_execution_status > 0:
                if time.monotonic() >= deadline:
                    return
                pace.wait()
        self._parked.clear()
        self._buffers.clear()


class _Staged(NamedTuple):
    """The first and last of the commands one HAL command was enqueued as (a staged copy, a fill that
    starts off its pattern's alignment: from the first's start to the last's end), and a temporary
    buffer (or None), kept until the action completes."""

    first: object
    last: object
    temp: object


def kernel_args(spec, buffers, offsets, constants, n: int) -> list:
    """``set_args`` of a ``builtin.cl`` kernel (``kernel_abi``): per binding its ``cl.Buffer`` and its
    byte offset as a ``ulong`` (``np.uint64``), then the constants and ``n`` as ``uint``; OUT_OF_RANGE
    naming the value that does not fit (``kernel_abi.launch_arguments``)."""
    offsets, constants, n = launch_arguments(spec, offsets, constants, n, "cl")
    args = []
    for buf, offset in zip(buffers, offsets):
        args += [buf, np.uint64(offset)]
    return args + [np.uint32(c) for c in constants] + [np.uint32(n)]


def _clock_offset(cl, q) -> int:
    """host CLOCK_MONOTONIC − the profiling clock.

    PoCL's profiling clock is CLOCK_MONOTONIC_RAW: when a marker's timestamp agrees with it (within
    the bracket of host reads around the marker), the offset is read on the host from the two clocks,
    to a microsecond; otherwise it is the marker's bracket midpoint (± half the bracket)."""
    before = time.monotonic_ns()
    raw_before = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    marker = cl.enqueue_marker(q)
    marker.wait()
    raw_after = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    after = time.monotonic_ns()
    try:
        device_t = marker.profile.end
    except cl.Error:
        return 0
    if raw_before <= device_t <= raw_after:
        pairs = []
        for _ in range(5):  # the tightest of a few back-to-back readings of both clocks
            a = time.monotonic_ns()
            r = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
            b = time.monotonic_ns()
            pairs.append((b - a, (a + b) // 2 - r))
        return min(pairs)[1]
    return (before + after) // 2 - device_t


def check_coherent(adapter: OpenCLAdapter) -> None:
    """The device must see host writes and the host device writes through USE_HOST_PTR buffers."""
    cl = adapter.cl
    store = bytearray(64)
    store[0] = 1
    buf = cl.Buffer(adapter.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                    hostbuf=np.frombuffer(store, np.uint8))
    cl.enqueue_copy(adapter.queues[0], buf, buf, byte_count=8, src_offset=0, dst_offset=32).wait()
    if store[32] != 1:
        raise HalError(StatusCode.UNAVAILABLE, f"opencl: device {adapter.cl_device.name!r} does not share "
                       "host memory through CL_MEM_USE_HOST_PTR")
