"""Metal through pyobjc (``pyobjc-framework-Metal``, macOS only) on the shared engine (HAL_SEMANTICS §B.5).

Untested in CI (no macOS there): kept deliberately plain. How the engine's notions map onto Metal:

* **Stream** = one ``MTLCommandQueue`` per HAL queue. Every command buffer committed on a stream first
  waits for and then advances the stream's own ``MTLSharedEvent`` (``_Stream.timeline``), so the
  command buffers of one stream run strictly one after another, like a CUDA stream or an in-order
  OpenCL queue, whatever overlap Metal would otherwise allow between them.
* **Native events** = :class:`MetalEvent`: a ``MTLSharedEvent`` and the value its latest record
  signals. The engine pools them (``event_pool_capacity``); every record signals a new, higher value,
  so a reused event never satisfies a wait early. The three-step submission of IREE's
  ``metal_device.m``: (1) ``stream_wait`` collects ``(event, value)`` pairs and :meth:`submit` encodes
  them with ``encodeWaitForEvent:value:`` into a *wait command buffer* committed first; (2) the op's
  commands go into a *work command buffer*; (3) :meth:`record` encodes ``encodeSignalEvent:value:`` into
  the still-open work command buffer (the signal command buffer; a new one when nothing is open) and
  commits it, with a **completion handler** that marks the event's record completed (or failed, with
  the command buffer's status and error) and wakes :meth:`synchronize` — on the engine's completion
  thread the engine then signals or fails the HAL semaphores and releases what the op retained.
  HAL semaphores stay the reference host timelines (the engine's design); the shared events carry only
  device→device dependencies.
* **Commands**: the resolved command list is planned by :func:`reference.utils.command_segments.plan_segments`
  (the same planner ``sim:metal`` charges): blit encoders for aligned one-byte fills and aligned copies,
  compute encoders (``MTLDispatchTypeConcurrent``) for dispatches and the ``fill_buffer_generic`` /
  ``copy_buffer_generic`` kernels of ``builtin.metal``, ``memoryBarrierWithScope:`` for memory barriers,
  and the command buffer's ``MTLEvent`` signalled and waited at increasing values between encoders.
  ``update`` copies from a new shared ``MTLBuffer`` holding the captured bytes. A copy between
  overlapping ranges of one buffer (binding-table slots aliasing it) is staged, as on OpenCL: source →
  a temporary ``Private`` ``MTLBuffer`` → target, two copies in the planned encoder (a blit encoder's
  copies run in order, and the temporary is hazard-tracked; in a compute encoder a
  ``memoryBarrierWithScope:`` separates the two ``copy_buffer_generic`` runs), the temporary retained
  with the action until its command buffer completed (:func:`copy_hops`).
* **Memory — host mirrored, like the CUDA adapter.** The reference ``Buffer``'s bytes are a host
  ``bytearray`` (what ``map_read``/``map_write`` use), which cannot back an ``MTLBuffer`` without a copy
  (``newBufferWithBytesNoCopy`` needs page-aligned memory). Each allocation gets an ``MTLBuffer`` with
  the resource options of :func:`reference.utils.metal_storage.resource_options` for its memory type
  (``Shared``, ``Managed`` or ``Private``); ``Managed`` and ``Private`` ones also get a ``Shared``
  staging buffer, and the work command buffer begins with a blit staging→device of the touched ranges
  and ends with device→staging of the written ones (``Managed``: plus ``didModifyRange:``). :meth:`submit`
  runs synchronously on the engine's worker: it waits for the stream (and the op's event waits), copies
  the touched ranges host→Metal, commits the work, waits for it and copies the written ranges back
  before the engine records any signal — correct for every interleaving of host mapping and device
  work, at the price of one op at a time on the device.
* **Indirect dispatch**: the workgroup counts are read when the dispatch is reached (the commands
  before it are committed and waited for first), because the kernel ABI computes ``n`` on the host.
* **Timestamps**: ``GPUStartTime``/``GPUEndTime`` of the work command buffer (seconds on the host's
  ``mach_absolute_time`` clock), shifted onto ``time.monotonic_ns`` by an offset measured at creation;
  per-command times are not available (every command gets the command buffer's span).
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from reference.hal import HalError, Range, StatusCode
from reference.utils.command_segments import MACOS, Encoder, EncoderEvent, plan_segments, repeated_byte
from reference.utils.metal_storage import resource_options
from reference.kernels import work_items

from ..common.engine import Adapter
from ..common.kernel_abi import OFFSET_BITS, fits, launch_arguments, source, symbol

COMPLETED, ERROR = 4, 5                 # MTLCommandBufferStatus
DISPATCH_CONCURRENT = 1                 # MTLDispatchTypeConcurrent
BARRIER_SCOPE_BUFFERS = 1               # MTLBarrierScopeBuffers
STORAGE_SHIFT, CACHE_SHIFT = 4, 0       # MTLResourceStorageModeShift, MTLResourceCPUCacheModeShift
STORAGE = {"Shared": 0, "Managed": 1, "Private": 2}
CACHE = {"DefaultCache": 0, "WriteCombined": 1}
HAZARD_UNTRACKED = 1 << 8               # MTLResourceHazardTrackingModeUntracked


def _metal():
    if sys.platform != "darwin":
        raise HalError(StatusCode.UNAVAILABLE, f"metal: Metal needs macOS (this is {sys.platform})")
    try:
        import Metal
    except ImportError as e:
        raise HalError(StatusCode.UNAVAILABLE, f"metal: pyobjc-framework-Metal is not installed ({e}); install "
                       "the 'metal' extra: pip install -e '.[metal]'") from None
    return Metal


def find_device():
    """The system default ``MTLDevice``; UNAVAILABLE off macOS, without pyobjc or without a GPU."""
    Metal = _metal()
    dev = Metal.MTLCreateSystemDefaultDevice()
    if dev is None:
        raise HalError(StatusCode.UNAVAILABLE, "metal: MTLCreateSystemDefaultDevice returned no device")
    return dev


def overlapping(a: Range, b: Range) -> bool:
    """Whether two ranges share bytes of one buffer (two binding-table slots aliasing it can)."""
    return a.buffer is b.buffer and a.offset < b.offset + b.length and b.offset < a.offset + a.length


def copy_hops(src, src_offset: int, dst, dst_offset: int, temp=None) -> list[tuple]:
    """The ``(from, offset, to, offset)`` copies that encode one HAL copy: the copy itself, or — with a
    temporary buffer, for overlapping ranges of one buffer, which neither ``copyFromBuffer`` nor the
    ``copy_buffer_generic`` kernel (one thread per byte) may be given — source → temporary (at offset
    0, so the planner's blit alignment still holds) → target, in that order: memmove, as the reference
    devices do."""
    if temp is None:
        return [(src, src_offset, dst, dst_offset)]
    return [(src, src_offset, temp, 0), (temp, 0, dst, dst_offset)]


def options_bits(memory_type, unified: bool) -> int:
    """``MTLResourceOptions`` bits for a HAL memory type (via ``reference.utils.metal_storage``)."""
    ro = resource_options(memory_type, "macos", unified_memory=unified)
    bits = (STORAGE[ro.storage_mode] << STORAGE_SHIFT) | (CACHE[ro.cpu_cache_mode] << CACHE_SHIFT)
    return bits | (HAZARD_UNTRACKED if ro.hazard_tracking_mode == "Untracked" else 0)


class MetalEvent:
    """A pooled native event: a shared event, the value its latest record signals, and completion."""

    __slots__ = ("shared", "value", "done", "error", "cbs")

    def __init__(self, shared):
        self.shared = shared
        self.value = 0
        self.done = threading.Event()
        self.error: HalError | None = None
        self.cbs: list = []


class _Stream:
    def __init__(self, device):
        self.queue = device.newCommandQueue()
        self.timeline = device.newSharedEvent()  # orders this stream's command buffers
        self.value = 0
        self.waits: list[tuple[object, int]] = []
        self.open = None        # the work command buffer not committed yet (record commits it)
        self.committed: list = []  # committed since the last record: checked by that record's handle


class MetalAdapter(Adapter):
    personality = "metal"
    stream_name = "command queue"
    wait_policy = "pending"
    max_wait_events = None
    pooled = True

    def __init__(self, mtl_device, queues: int):
        self.Metal = _metal()
        self.device = mtl_device
        self.unified = bool(mtl_device.hasUnifiedMemory()) if hasattr(mtl_device, "hasUnifiedMemory") else True
        options = self.Metal.MTLCompileOptions.alloc().init()
        options.setFastMathEnabled_(False)  # no reassociation or contraction: float results as the reference's
        library, err = mtl_device.newLibraryWithSource_options_error_(source("metal"), options, None)
        if library is None:
            raise HalError(StatusCode.INTERNAL, f"metal: MSL compile failed: {err}")
        self.library = library
        self.pipelines: dict[str, object] = {}
        self.streams = [_Stream(mtl_device) for _ in range(queues)]
        self._buffers: dict[int, tuple] = {}  # id(storage) → (storage, MTLBuffer, staging or None, storage mode)
        self._lock = threading.Lock()
        # host CLOCK_MONOTONIC − the command-buffer clock (seconds of mach_absolute_time, CACurrentMediaTime)
        cb = self.streams[0].queue.commandBuffer()
        before = time.monotonic_ns()
        cb.commit()
        cb.waitUntilCompleted()
        after = time.monotonic_ns()
        gpu = cb.GPUEndTime() if hasattr(cb, "GPUEndTime") else 0.0
        self.offset_ns = (before + after) // 2 - int(gpu * 1e9) if gpu else 0

    # -- events ------------------------------------------------------------------------------------------

    def create_event(self):
        return MetalEvent(self.device.newSharedEvent())

    def destroy_event(self, handle) -> None:
        handle.shared = None  # released by pyobjc's reference counting

    def stream_wait(self, stream: int, handle) -> None:
        self.streams[stream].waits.append((handle.shared, handle.value))

    def _command_buffer(self, st: _Stream):
        """A new command buffer of the stream that runs after all its earlier ones."""
        cb = st.queue.commandBuffer()
        cb.encodeWaitForEvent_value_(st.timeline, st.value)
        return cb

    def _commit(self, st: _Stream, cb, handler=None) -> None:
        st.value += 1
        cb.encodeSignalEvent_value_(st.timeline, st.value)
        if handler is not None:
            cb.addCompletedHandler_(handler)
        cb.commit()
        st.committed.append(cb)

    def _flush_waits(self, st: _Stream) -> None:
        """Step 1 of the submission: the wait command buffer, committed before the work."""
        if st.waits:
            cb = self._command_buffer(st)
            for shared, value in st.waits:
                cb.encodeWaitForEvent_value_(shared, value)
            st.waits = []
            self._commit(st, cb)

    def record(self, stream: int, handle):
        st = self.streams[stream]
        if handle is None:
            handle = self.create_event()
        self._flush_waits(st)
        cb, st.open = st.open, None
        if cb is None:
            cb = self._command_buffer(st)
        handle.value += 1
        handle.done.clear()
        handle.error = None
        cb.encodeSignalEvent_value_(handle.shared, handle.value)   # step 3: the signal command buffer

        def completed(buffer, handle=handle):  # runs on a Metal thread: no engine calls, only the wake-up
            if buffer.status() != COMPLETED and handle.error is None:
                handle.error = HalError(StatusCode.ABORTED, f"metal: command buffer failed (status "
                                        f"{buffer.status()}): {buffer.error()}")
            handle.done.set()
        earlier, st.committed = st.committed, []
        handle.cbs = earlier
        self._commit(st, cb, completed)
        st.committed = []
        return handle

    def synchronize(self, handle, backlog: int = 0) -> HalError | None:
        handle.done.wait()
        for cb in handle.cbs:  # the stream's command buffers committed since the previous record
            cb.waitUntilCompleted()
            if cb.status() != COMPLETED:
                return HalError(StatusCode.ABORTED, f"metal: command buffer failed (status {cb.status()}): "
                                f"{cb.error()}")
        handle.cbs = []
        return handle.error

    # -- memory --------------------------------------------------------------------------------------

    def _entry(self, rng: Range, what: str):
        store = rng.buffer.storage(what)
        key = id(store)
        with self._lock:
            entry = self._buffers.get(key)
            if entry is not None and entry[0] is store:
                return entry
        bits = options_bits(rng.buffer.memory_type, self.unified)
        mode = (bits >> STORAGE_SHIFT) & 0xF
        size = max(len(store), 4)
        mtl = self.device.newBufferWithLength_options_(size, bits)
        staging = None if mode == STORAGE["Shared"] else \
            self.device.newBufferWithLength_options_(size, STORAGE["Shared"] << STORAGE_SHIFT)
        entry = (store, mtl, staging, mode)
        with self._lock:
            self._buffers[key] = entry
        return entry

    def _buffer(self, rng: Range, what: str):
        return self._entry(rng, what)[1]

    @staticmethod
    def _host_view(buf):
        return buf.contents().as_buffer(buf.length())

    # -- work --------------------------------------------------------------------------------------------

    def submit(self, stream: int, action) -> None:
        st = self.streams[stream]
        commands = action.op.commands
        plan = plan_segments(commands, MACOS)  # UNIMPLEMENTED for HAL events and HOST-stage barriers
        self._flush_waits(st)
        self._drain(st)  # the stream, with the op's event waits, is done: the host bytes are current
        touched, written = {}, {}
        for cmd in commands:
            for rng, access in cmd.accesses:
                if rng.length:
                    key = (id(rng.buffer), rng.offset, rng.length)
                    touched[key] = rng
                    if "w" in access:
                        written[key] = rng
        for rng in touched.values():  # host → Metal (staging for Managed/Private)
            store, mtl, staging, _ = self._entry(rng, "command operand")
            dst = self._host_view(staging if staging is not None else mtl)
            dst[rng.offset:rng.offset + rng.length] = memoryview(store)[rng.offset:rng.offset + rng.length]
        cb = self._command_buffer(st)
        self._staging_blit(cb, touched.values(), to_device=True)
        by_index = {c.index: c for c in commands}
        keep = []
        cb_event = self.device.newEvent()
        for seg in plan:
            if isinstance(seg, EncoderEvent):
                cb.encodeSignalEvent_value_(cb_event, seg.value)
                cb.encodeWaitForEvent_value_(cb_event, seg.value)
                continue
            cb = self._encode(st, cb, seg, by_index, keep)
        self._staging_blit(cb, written.values(), to_device=False)
        self._commit(st, cb)
        action.native.append(("keep", keep))  # update bytes, staged-copy temporaries: until the op completes
        self._drain(st)
        action.native.append(("cb", cb))
        for rng in written.values():  # Metal → host
            store, mtl, staging, _ = self._entry(rng, "command operand")
            src = self._host_view(staging if staging is not None else mtl)
            store[rng.offset:rng.offset + rng.length] = src[rng.offset:rng.offset + rng.length]

    def _drain(self, st: _Stream) -> None:
        """Wait for every command buffer committed on the stream so far; ABORTED if one failed."""
        for cb in st.committed:
            cb.waitUntilCompleted()
            if cb.status() != COMPLETED:
                st.committed = []
                raise HalError(StatusCode.ABORTED, f"metal: command buffer failed (status {cb.status()}): {cb.error()}")
        st.committed = []

    def _staging_blit(self, cb, ranges, to_device: bool) -> None:
        blit = None
        for rng in ranges:
            _, mtl, staging, mode = self._entry(rng, "command operand")
            if staging is None:
                continue
            blit = blit or cb.blitCommandEncoder()
            a, b = (staging, mtl) if to_device else (mtl, staging)
            blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(a, rng.offset, b, rng.offset, rng.length)
        if blit is not None:
            blit.endEncoding()

    def _pipeline(self, name: str):
        p = self.pipelines.get(name)
        if p is None:
            fn = self.library.newFunctionWithName_(name)
            if fn is None:
                raise HalError(StatusCode.INTERNAL, f"metal: no function {name} in builtin.metal")
            p, err = self.device.newComputePipelineStateWithFunction_error_(fn, None)
            if p is None:
                raise HalError(StatusCode.INTERNAL, f"metal: pipeline {name}: {err}")
            self.pipelines[name] = p
        return p

    def _threads(self, enc, pipeline, n: int) -> None:
        Metal = self.Metal
        width = max(1, min(n, pipeline.maxTotalThreadsPerThreadgroup()))
        enc.dispatchThreads_threadsPerThreadgroup_(Metal.MTLSizeMake(n, 1, 1), Metal.MTLSizeMake(width, 1, 1))

    def _run(self, enc, name: str, buffers, params, n: int) -> None:
        pipeline = self._pipeline(name)
        enc.setComputePipelineState_(pipeline)
        for k, buf in enumerate(buffers):
            enc.setBuffer_offset_atIndex_(buf, 0, k)
        data = np.array(params, np.uint32).tobytes()
        enc.setBytes_length_atIndex_(data, len(data), len(buffers))
        self._threads(enc, pipeline, n)

    def _encode(self, st: _Stream, cb, seg: Encoder, by_index, keep):
        """Encode one planned encoder into ``cb``; returns the command buffer to continue with (a new one
        after an indirect dispatch, which commits and waits for the work before it)."""
        enc = cb.blitCommandEncoder() if seg.kind == "blit" else \
            cb.computeCommandEncoderWithDispatchType_(DISPATCH_CONCURRENT if seg.concurrent else 0)
        for step in seg.steps:
            cmd = by_index[step.index]
            if step.method == "memoryBarrierWithScope":
                enc.memoryBarrierWithScope_(BARRIER_SCOPE_BUFFERS)
            elif cmd.kind == "fill":
                target = cmd.accesses[0][0]
                if target.length == 0:
                    continue
                buf = self._buffer(target, "fill target")
                pattern = bytes(cmd.args)
                if step.method == "fillBuffer":
                    enc.fillBuffer_range_value_(buf, (target.offset, target.length), repeated_byte(pattern))
                else:
                    widened = int.from_bytes((pattern * (4 // len(pattern)))[:4], "little")
                    params = [fits(target.offset, OFFSET_BITS["metal"], "fill_buffer_generic target offset"),
                              fits(target.length, OFFSET_BITS["metal"], "fill_buffer_generic length"), widened]
                    self._run(enc, "fill_buffer_generic", [buf], params, target.length)
            elif cmd.kind in ("copy", "update"):
                target = cmd.accesses[-1][0]
                if target.length == 0:
                    continue
                temp = None
                if cmd.kind == "update":  # the captured bytes in a new shared buffer, then a copy
                    data = bytes(cmd.args)
                    src_buf = self.device.newBufferWithBytes_length_options_(data, len(data), 0)
                    keep.append(src_buf)
                    src_off = 0
                else:
                    src = cmd.accesses[0][0]
                    src_buf, src_off = self._buffer(src, "copy source"), src.offset
                    if overlapping(src, target):  # aliased binding-table slots: staged (memmove)
                        temp = self.device.newBufferWithLength_options_(target.length,
                                                                        STORAGE["Private"] << STORAGE_SHIFT)
                        keep.append(temp)
                dst_buf = self._buffer(target, "copy target")
                for k, (a, a_off, b, b_off) in enumerate(copy_hops(src_buf, src_off, dst_buf, target.offset, temp)):
                    if step.method == "copyFromBuffer":
                        enc.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(a, a_off, b, b_off,
                                                                                         target.length)
                    else:
                        if k:  # the second kernel reads what the first wrote (a concurrent encoder)
                            enc.memoryBarrierWithScope_(BARRIER_SCOPE_BUFFERS)
                        params = [fits(a_off, OFFSET_BITS["metal"], "copy_buffer_generic source offset"),
                                  fits(b_off, OFFSET_BITS["metal"], "copy_buffer_generic target offset"),
                                  fits(target.length, OFFSET_BITS["metal"], "copy_buffer_generic length")]
                        self._run(enc, "copy_buffer_generic", [a, b], params, target.length)
            elif cmd.kind == "dispatch":
                spec, workgroups, constants, bindings = cmd.args
                if isinstance(workgroups, Range):  # commit what is encoded, wait, read the counts
                    enc.endEncoding()
                    self._staging_blit(cb, [workgroups], to_device=False)
                    self._commit(st, cb)
                    self._drain(st)
                    _, mtl, staging, _ = self._entry(workgroups, "dispatch workgroups")
                    view = self._host_view(staging if staging is not None else mtl)
                    workgroups = tuple(int(x) for x in np.frombuffer(
                        bytes(view[workgroups.offset:workgroups.offset + 12]), np.uint32))
                    cb = self._command_buffer(st)
                    enc = cb.computeCommandEncoderWithDispatchType_(DISPATCH_CONCURRENT if seg.concurrent else 0)
                    if 0 in workgroups:
                        continue
                n = work_items(spec, workgroups, constants, [b.length for b in bindings])
                if n <= 0:
                    continue
                # builtin.metal's params are uint: an offset at or past 4 GiB is refused (kernel_abi)
                offsets, constants, n = launch_arguments(spec, [b.offset for b in bindings], constants, n, "metal")
                self._run(enc, symbol(spec.name), [self._buffer(b, f"{spec.name} binding") for b in bindings],
                          offsets + constants + [n], n)
        enc.endEncoding()
        return cb

    def timing(self, action):
        cbs = [cb for kind, cb in action.native if kind == "cb"]
        if not cbs or not self.offset_ns:
            return None
        start = int(cbs[0].GPUStartTime() * 1e9) + self.offset_ns
        end = int(cbs[-1].GPUEndTime() * 1e9) + self.offset_ns
        return start, end, [(c.index, start, end) for c in action.op.commands if c.kind != "barrier"]

    def close(self) -> None:
        for st in self.streams:
            for cb in st.committed:
                cb.waitUntilCompleted()
        self._buffers.clear()
