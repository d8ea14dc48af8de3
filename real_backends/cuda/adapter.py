"""CUDA through the driver API (``cuda-bindings``): IREE's CUDA-v2 design on the shared engine (B.3).

* **Streams**: one dispatch stream per HAL queue (``cuStreamCreate(CU_STREAM_NON_BLOCKING)``) in the
  device's primary context. The engine's worker thread issues, its completion thread
  ``cuEventSynchronize``s the last event of each action (the CUDA-v2 completion thread, no
  ``cuLaunchHostFunc``).
* **Native events**: ``CUevent``\\ s from the engine's :class:`~real_backends.common.pool.EventPool`
  (``event_pool_capacity``, default 32, IREE's default); a device-signal event is ``cuEventRecord``\\ ed
  on the dispatch stream, a device wait is ``cuStreamWaitEvent``. CUDA has no user events: waits on
  values nobody has recorded yet keep the action pending (``wait_policy = "pending"``) and later ready
  actions are issued past it, as IREE does; at most 32 events per action (RESOURCE_EXHAUSTED beyond).
* **Memory — host-mirrored device memory.** The reference ``Buffer`` keeps its bytes in a host
  ``bytearray`` that ``map_read``/``map_write`` use directly, so the host copy is the one the HAL
  contract observes. Each allocation also gets device memory (``cuMemAlloc``, lazily, on first use).
  Submitting an op (on the worker thread): ``cuStreamSynchronize`` the dispatch stream (its earlier
  work and the ``cuStreamWaitEvent``\\ s of this op are then done, so the host bytes are current), copy
  every range the op's commands touch host→device, enqueue the commands, copy every range they write
  device→host and synchronize again; then the engine records the signal events. This is the simplest
  option that is correct for every interleaving of host mapping, host calls and device work: the device
  copy is refreshed from the host before every op and the host copy is final before any signal. Its
  cost is that one op at a time runs on the device (the worker blocks on the stream). The alternatives
  were rejected: ``cuMemHostRegister`` on the ``bytearray`` pins whole pages, which neighbouring Python
  objects share (double registration fails, and freed pages stay pinned); asynchronous mirroring needs
  stream-ordered host copies (``cuLaunchHostFunc`` into Python) — a possible later optimisation.
* **Commands**: fill → ``cuMemsetD8/D16/D32Async`` (aligned to the pattern where the range starts off
  it: a subspan or binding at an odd byte, ``_fill``);
  update → ``cuMemcpyHtoDAsync`` from the bytes captured at record time; copy → ``cuMemcpyDtoDAsync``
  (overlapping ranges of one allocation — binding-table slots aliasing it — are staged, as on OpenCL:
  source → a ``cuMemAlloc`` scratch → target, two copies in stream order, one command whose span runs
  from the first's start to the second's end; the scratch is freed once ``submit`` synchronized the
  stream, or, in a graph, belongs to the graph); dispatch → ``cuLaunchKernel``
  of the NVRTC-compiled builtin library (``kernel_abi``: per binding a device pointer + 64-bit byte
  offset, the constants, ``n``; blocks of 256 threads) — a CUBIN for the device's architecture where NVRTC builds
  one, else PTX the driver JITs (``nvrtc.pick_image``); barriers and HAL events need nothing on one in-order
  stream.
* **Graphs** (IREE's default ``command_buffer_mode = GRAPH``): a *reusable* command buffer (not
  ``ONE_SHOT``) executed through ``queue_execute`` is captured once into a ``CUgraph``
  (``cuStreamBeginCapture`` in relaxed mode → the same stream commands → ``cuStreamEndCapture`` →
  ``cuGraphInstantiate``) and every later execution with the same resolved commands — the same device
  addresses, ranges, patterns and constants, so a different binding table gets its own graph — is one
  ``cuGraphLaunch``. ``update`` bytes are staged in device memory owned by the graph (a device-to-device
  copy node; uploaded by ``cuMemcpyHtoDAsync`` on the dispatch stream before the capture, never by a
  synchronous ``cuMemcpyHtoD``, whose legacy-stream DMA a non-blocking stream is not ordered after), as
  is the scratch of a staged copy (two memcpy nodes). Command buffers with an indirect
  dispatch (the counts are read on the host) and one-shot ones are replayed as stream commands. A
  command buffer keeps its ``GRAPHS_PER_COMMAND_BUFFER`` (4) most recently used graphs; they are
  destroyed when their command buffer is garbage. Option ``graphs=False`` turns them off.
* **Contexts**: every thread that calls CUDA (the engine's worker and completion threads, host threads
  creating, closing or failing work) makes the device's primary context current first, unless this
  module made it current there last — two devices of two ordinals on one host thread switch (IREE sets
  its context at each entry point); creation and ``close`` always set it. A failed creation releases
  what it made (streams, module, the retained context).
* **Device memory** of an allocation is freed (by the worker) once its HAL buffer is garbage or a
  ``queue_dealloca`` decommitted it (``forget``), as IREE frees a transient at dealloca.
* **Timestamps**: an anchor ``CUevent`` is recorded on the idle stream with a host ``CLOCK_MONOTONIC``
  read, one event after each command (after the graph launch for a graph: its commands share its span);
  ``cuEventElapsedTime`` places them on the host clock.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref

import numpy as np

from reference.hal import HalError, Range, StatusCode
from reference.kernels import work_items

from ..common.engine import Adapter
from ..common.kernel_abi import launch_arguments, symbol
from .graphs import GraphCache, _address, overlapping
from .nvrtc import compile_image, nvrtc_version, pick_image

BLOCK = 256  # threads per block of every dispatch

# The context this module last made current on each thread (shared by every adapter: a host thread
# using two devices — ordinals with their own primary contexts — switches between them).
_THREAD = threading.local()


def _cu():
    try:
        from cuda.bindings import driver as cu
    except ImportError as e:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: cuda-bindings is not installed ({e}); install the 'cuda' "
                       "extra: pip install -e '.[cuda]'") from None
    return cu


def check(result, what: str):
    """Unpack a cuda-bindings result tuple ``(CUresult, values…)``; HalError on failure."""
    cu = _cu()
    err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        code = StatusCode.RESOURCE_EXHAUSTED if err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY else StatusCode.INTERNAL
        raise HalError(code, f"cuda: {what} failed ({name.decode() if isinstance(name, bytes) else err})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def kernel_params(spec, pointers, offsets, constants, n: int) -> tuple[tuple, tuple]:
    """``cuLaunchKernel``'s ``kernelParams`` for ``builtin.cu`` (``kernel_abi``): per binding its device
    pointer and its byte offset (``unsigned long long``: 8 bytes), then the 32-bit constants and ``n``;
    OUT_OF_RANGE naming the value that does not fit (``kernel_abi.launch_arguments``)."""
    offsets, constants, n = launch_arguments(spec, offsets, constants, n, "cu")
    values, types = [], []
    for ptr, offset in zip(pointers, offsets):
        values += [ptr, offset]
        types += [ctypes.c_void_p, ctypes.c_uint64]
    values += constants + [n]
    types += [ctypes.c_uint32] * (len(constants) + 1)
    return tuple(values), tuple(types)


def device_count() -> int:
    """How many CUDA devices the driver reports; UNAVAILABLE (with the reason) without a driver."""
    cu = _cu()
    try:
        err = cu.cuInit(0)
    except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda.so cannot be loaded
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: no NVIDIA driver (libcuda could not be loaded: {e})") from None
    err = err[0] if isinstance(err, tuple) else err
    if err != cu.CUresult.CUDA_SUCCESS:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: cuInit failed ({err.name}): no usable NVIDIA driver/GPU")
    err, count = cu.cuDeviceGetCount()
    return count if err == cu.CUresult.CUDA_SUCCESS else 0


def present_count() -> int:
    """:func:`device_count`, UNAVAILABLE when the driver reports none (no device to look for)."""
    count = device_count()
    if count == 0:
        raise HalError(StatusCode.UNAVAILABLE, "cuda: the driver reports no CUDA device")
    return count


def device_uuid(ordinal: int) -> bytes:
    """The 16 bytes of device ``ordinal``'s UUID (``cuDeviceGetUuid``; in MIG mode the MIG instance's,
    which ``nvidia-smi -L`` prints as ``MIG-…``)."""
    cu = _cu()
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    return bytes(check(cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)


def find_device(ordinal: int = 0):
    """``(CUdevice, name)`` of device ``ordinal``; UNAVAILABLE (with the reason) without a driver or GPU,
    NOT_FOUND for an ordinal the driver does not have."""
    cu = _cu()
    count = present_count()
    if not 0 <= ordinal < count:  # IREE: NOT_FOUND "default device %d not found (of %ld enumerated)"
        raise HalError(StatusCode.NOT_FOUND, f"cuda: no device {ordinal} (the driver has {count}: "
                       f"ordinals 0 to {count - 1})")
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    name = check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return dev, name.split(b"\0", 1)[0].decode(errors="replace")


class CudaAdapter(GraphCache, Adapter):
    personality = "cuda"
    _check = staticmethod(check)  # (GraphCache calls it through the class: no import cycle)
    stream_name = "dispatch stream"
    wait_policy = "pending"
    max_wait_events = 32  # IREE_HAL_CUDA_MAX_WAIT_EVENT_COUNT
    pooled = True

    def __init__(self, cu_device, queues: int, graphs: bool = True):
        cu = self.cu = _cu()
        self.use_graphs = graphs
        self.cu_device = cu_device
        self.ctx = check(cu.cuDevicePrimaryCtxRetain(cu_device), "cuDevicePrimaryCtxRetain")
        self._ctx_key = int(self.ctx)
        self.module = None
        self.streams = []
        try:
            self._bind(force=True)
            major = check(cu.cuDeviceGetAttribute(
                cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cu_device), "cuDeviceGetAttribute")
            minor = check(cu.cuDeviceGetAttribute(
                cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cu_device), "cuDeviceGetAttribute")
            self.compute_capability = (major, minor)
            self.image_kind, self.arch = pick_image(major, minor)  # a CUBIN where NVRTC can build one
            self.image = compile_image(self.image_kind, self.arch)
            self.module = self._load_module(self.image)
            flags = int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
            for _ in range(queues):
                self.streams.append(check(cu.cuStreamCreate(flags), "cuStreamCreate"))
        except BaseException:  # what was made goes, the retained context is released
            for stream in self.streams:
                cu.cuStreamDestroy(stream)
            if self.module is not None:
                cu.cuModuleUnload(self.module)
            cu.cuDevicePrimaryCtxRelease(cu_device)
            raise
        self.functions: dict[str, object] = {}
        self._memory: dict[int, tuple] = {}      # id(storage) → (storage, CUdeviceptr)
        self._owned: dict[int, list[int]] = {}   # id(root Buffer) → keys of _memory it owns
        self._to_free: list = []                 # device pointers of dead buffers (freed by the worker)
        self._oneshot: set[int] = set()          # unpooled completion events (record(None))
        self._graphs: dict[tuple, _Graph] = {}   # (id(command buffer), signature) → instantiated graph
        self._graph_keys: dict[int, list] = {}   # id(command buffer) → its keys in _graphs
        self._dead_graphs: list = []
        self._lock = threading.Lock()

    def _load_module(self, image: bytes):
        """``cuModuleLoadData``; a driver too old to JIT NVRTC's PTX is UNAVAILABLE, saying both releases."""
        cu = self.cu
        result = cu.cuModuleLoadData(image)
        if result[0] == cu.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
            version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")  # e.g. 13000 for CUDA 13.0
            nv_major, nv_minor = nvrtc_version()
            cc = "%d.%d" % self.compute_capability
            raise HalError(StatusCode.UNAVAILABLE,
                           f"cuda: the NVIDIA driver (CUDA {version // 1000}.{version % 1000 // 10}) cannot JIT the "
                           f"PTX of NVRTC {nv_major}.{nv_minor} for compute capability {cc} (NVRTC builds no "
                           f"machine code for it): install the nvidia-cuda-nvrtc of the driver's release "
                           f"(pip install 'nvidia-cuda-nvrtc=={version // 1000}.{version % 1000 // 10}.*') "
                           f"or a newer driver")
        return check(result, "cuModuleLoadData")

    def _bind(self, force: bool = False) -> None:
        """Make the device's primary context current on the calling thread (engine threads included),
        unless this module made it current there last — per thread, not per adapter: a host thread
        that created or used another device (another ordinal: another primary context) since must
        switch back, as IREE sets its context at each entry point. ``force`` (creation, close: host
        threads whose current context user code may have changed): always."""
        if force or getattr(_THREAD, "ctx", None) != self._ctx_key:
            check(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            _THREAD.ctx = self._ctx_key

    # -- events ----------------------------------------------------------------------------------------

    def create_event(self):
        """A synchronization event (pooled by the engine): no timing, as IREE's event pool."""
        self._bind()
        flags = int(self.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        return check(self.cu.cuEventCreate(flags), "cuEventCreate")

    def _timing_event(self):
        return check(self.cu.cuEventCreate(int(self.cu.CUevent_flags.CU_EVENT_DEFAULT)), "cuEventCreate")

    def destroy_event(self, handle) -> None:
        self._bind()
        self.cu.cuEventDestroy(handle)

    def stream_wait(self, stream: int, handle) -> None:
        self._bind()
        check(self.cu.cuStreamWaitEvent(self.streams[stream], handle, 0), "cuStreamWaitEvent")

    def record(self, stream: int, handle):
        self._bind()
        if handle is None:  # the completion event of an op that signals nothing: destroyed once synchronized
            handle = self.create_event()
            try:
                check(self.cu.cuEventRecord(handle, self.streams[stream]), "cuEventRecord")
            except BaseException:  # never synchronized: destroyed now
                self.destroy_event(handle)
                raise
            with self._lock:
                self._oneshot.add(int(handle))
            return handle
        check(self.cu.cuEventRecord(handle, self.streams[stream]), "cuEventRecord")
        return handle

    def synchronize(self, handle, backlog: int = 0) -> HalError | None:
        self._bind()
        try:
            check(self.cu.cuEventSynchronize(handle), "cuEventSynchronize")
        except HalError as e:
            return HalError(StatusCode.ABORTED, str(e))
        finally:
            with self._lock:
                oneshot = int(handle) in self._oneshot
                self._oneshot.discard(int(handle))
            if oneshot:
                self.destroy_event(handle)
        return None

    # -- memory ----------------------------------------------------------------------------------------

    def _device_ptr(self, rng: Range, what: str) -> int:
        """The device address of the allocation behind ``rng`` (allocated on first use)."""
        store = rng.buffer.storage(what)
        key = id(store)
        with self._lock:
            entry = self._memory.get(key)
            if entry is not None and entry[0] is store:
                return int(entry[1])
        ptr = check(self.cu.cuMemAlloc(max(len(store), 1)), "cuMemAlloc")
        root = rng.buffer.root
        with self._lock:
            old = self._memory.get(key)
            if old is not None:  # a dead storage's id reused: its memory goes
                self._to_free.append(old[1])
            self._memory[key] = (store, ptr)
            owned = self._owned.get(id(root))
            if owned is None:
                owned = self._owned[id(root)] = []
                weakref.finalize(root, self._buffer_died, id(root))
            owned.append(key)
        return int(ptr)

    def _buffer_died(self, root_id: int) -> None:
        # May run on any thread (garbage collection): only queue the memory; the worker frees it.
        with self._lock:
            for key in self._owned.pop(root_id, ()):
                entry = self._memory.pop(key, None)
                if entry is not None:
                    self._to_free.append(entry[1])

    def forget(self, buffer) -> None:
        """A dealloca decommitted ``buffer``'s allocation (completion thread): its device memory goes —
        queued, the worker frees it (IREE frees a transient at dealloca). Keys leave the root's list
        too: a dropped storage's id may be reused by another buffer's storage."""
        root = buffer.root
        try:
            live = buffer.storage()
        except HalError:
            live = None
        with self._lock:
            owned = self._owned.get(id(root))
            if not owned:
                return
            for key in list(owned):
                entry = self._memory.get(key)
                if entry is not None and entry[0] is not live:
                    del self._memory[key]
                    self._to_free.append(entry[1])
                    owned.remove(key)

    def _free_dead(self) -> None:
        with self._lock:
            dead, self._to_free = self._to_free, []
            graphs, self._dead_graphs = self._dead_graphs, []
        for ptr in dead:
            self.cu.cuMemFree(ptr)
        for graph in graphs:
            self._destroy_graph(graph)

    # -- work ------------------------------------------------------------------------------------------

    def submit(self, stream: int, action) -> None:
        cu = self.cu
        self._bind()
        self._free_dead()
        s = self.streams[stream]
        commands = action.op.commands
        # 1. The stream (earlier work, this op's event waits) is done: the host bytes are current.
        check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
        # 2. Host → device for every range the commands touch (written ranges too: a partial write
        #    must not expose stale device bytes when the range is copied back).
        touched: dict[tuple[int, int], tuple] = {}
        written: dict[tuple[int, int], tuple] = {}
        for cmd in commands:
            for rng, access in cmd.accesses:
                if rng.length == 0:
                    continue
                key = (id(rng.buffer), rng.offset, rng.length)
                touched[key] = rng
                if "w" in access:
                    written[key] = rng
        for rng in touched.values():
            store = rng.buffer.storage("command operand")
            check(cu.cuMemcpyHtoDAsync(self._device_ptr(rng, "command operand") + rng.offset,
                                       _address(store) + rng.offset, rng.length, s), "cuMemcpyHtoDAsync")
        # 3. The commands, with a timing event after each; the anchor pins the device clock to the host's.
        anchor = self._timing_event()
        marks, keep, scratch = [], [], []
        try:  # (every event made here is destroyed in the finally, whichever call fails)
            check(cu.cuEventRecord(anchor, s), "cuEventRecord")
            check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
            anchor_ns = time.monotonic_ns()
            graph = self._graph(s, action.op)
            if graph is not None:
                check(cu.cuGraphLaunch(graph.exec, s), "cuGraphLaunch")
                ev = self._timing_event()
                marks.append((graph.indices, ev))
                check(cu.cuEventRecord(ev, s), "cuEventRecord")
                action.native.append(("graph", graph))  # retained until the op completes
            else:
                for cmd in commands:
                    if self._enqueue(s, cmd, keep, scratch=scratch):
                        ev = self._timing_event()
                        marks.append(((cmd.index,), ev))
                        check(cu.cuEventRecord(ev, s), "cuEventRecord")
            # 4. Device → host for every written range, then wait: the host copy is final.
            for rng in written.values():
                store = rng.buffer.storage("command operand")
                check(cu.cuMemcpyDtoHAsync(_address(store) + rng.offset,
                                           self._device_ptr(rng, "command operand") + rng.offset, rng.length, s),
                      "cuMemcpyDtoHAsync")
            check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
            times, prev = [], 0
            for indices, ev in marks:
                ms = check(cu.cuEventElapsedTime(anchor, ev), "cuEventElapsedTime")
                end = anchor_ns + int(ms * 1e6)
                times.extend((index, anchor_ns + prev, end) for index in indices)
                prev = end - anchor_ns
            action.native.append(("timing", times))
        finally:
            if scratch:  # staged copies' scratch memory: after the stream (done unless a call failed)
                cu.cuStreamSynchronize(s)
                for ptr in scratch:
                    cu.cuMemFree(ptr)
            for _, ev in marks:
                self.destroy_event(ev)
            self.destroy_event(anchor)

    def _fill(self, ptr: int, pattern: bytes, length: int, s) -> None:
        """``cuMemsetD16/D32Async`` need a 2/4-byte aligned pointer: a range that starts elsewhere — a
        subspan or binding starting at an odd byte, which the HAL allows (CB13 checks the reference's
        own offset) — is its bytes up to the next aligned address one ``cuMemsetD8Async`` each, the
        pattern rotated to start there over the whole patterns, and the bytes after them one each."""
        cu, k = self.cu, len(pattern)
        fns = {1: cu.cuMemsetD8Async, 2: cu.cuMemsetD16Async, 4: cu.cuMemsetD32Async}
        head = min((-ptr) % k, length)
        body = (length - head) // k * k
        for i in range(head):
            check(cu.cuMemsetD8Async(ptr + i, pattern[i % k], 1, s), "cuMemsetD8Async")
        if body:
            rotated = pattern[head % k:] + pattern[:head % k]
            fn = fns[k]
            check(fn(ptr + head, int.from_bytes(rotated, "little"), body // k, s), fn.__name__)
        for i in range(head + body, length):
            check(cu.cuMemsetD8Async(ptr + i, pattern[i % k], 1, s), "cuMemsetD8Async")
    def _enqueue(self, s, cmd, keep: list, staged: dict | None = None, scratch: list | None = None) -> bool:
        """Enqueue one command on stream ``s``; False when it has nothing to do on the device.

        ``staged`` (graph capture): command index → device memory the graph owns (update bytes, the
        scratch of a staged copy); otherwise a staged copy's scratch is ``cuMemAlloc``\\ ed and appended
        to ``scratch``, which the caller frees once the stream is synchronized."""
        cu, kind = self.cu, cmd.kind
        if kind == "fill":
            target = cmd.accesses[0][0]
            if target.length == 0:
                return False
            self._fill(self._device_ptr(target, "fill target") + target.offset, bytes(cmd.args), target.length, s)
        elif kind == "update":
            target = cmd.accesses[0][0]
            data = bytes(cmd.args)
            if not data:
                return False
            dst = self._device_ptr(target, "update target") + target.offset
            if staged is not None:  # graph capture: a device-to-device copy from the graph's own copy
                check(cu.cuMemcpyDtoDAsync(dst, staged[cmd.index], len(data), s), "cuMemcpyDtoDAsync")
                return True
            keep.append(data)  # alive until the stream is synchronized at the end of submit
            check(cu.cuMemcpyHtoDAsync(dst, _address(data), len(data), s), "cuMemcpyHtoDAsync")
        elif kind == "copy":
            src, dst = cmd.accesses[0][0], cmd.accesses[1][0]
            if src.length == 0:
                return False
            a = self._device_ptr(src, "copy source") + src.offset
            b = self._device_ptr(dst, "copy target") + dst.offset
            if overlapping(src, dst):  # binding-table slots aliasing one buffer: staged (memmove)
                if staged is not None:  # graph capture: scratch memory the graph owns (two memcpy nodes)
                    temp = staged[cmd.index]
                else:  # freed by submit once the stream is synchronized
                    temp = check(cu.cuMemAlloc(src.length), "cuMemAlloc")
                    scratch.append(temp)
                check(cu.cuMemcpyDtoDAsync(temp, a, src.length, s), "cuMemcpyDtoDAsync")
                a = temp
            check(cu.cuMemcpyDtoDAsync(b, a, src.length, s), "cuMemcpyDtoDAsync")
        elif kind == "dispatch":
            return self._dispatch(s, cmd)
        else:  # barrier, HAL events: one in-order stream already orders everything
            return False
        return True

    def _function(self, name: str):
        fn = self.functions.get(name)
        if fn is None:
            fn = self.functions[name] = check(self.cu.cuModuleGetFunction(self.module, symbol(name).encode()),
                                              "cuModuleGetFunction")
        return fn

    def _dispatch(self, s, cmd) -> bool:
        cu = self.cu
        spec, workgroups, constants, bindings = cmd.args
        if isinstance(workgroups, Range):  # indirect: the counts as the device has them now
            check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
            counts = bytearray(12)
            check(cu.cuMemcpyDtoHAsync(_address(counts), self._device_ptr(workgroups, "dispatch workgroups")
                                       + workgroups.offset, 12, s), "cuMemcpyDtoHAsync")
            check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
            workgroups = tuple(int(x) for x in np.frombuffer(bytes(counts), np.uint32))
            if 0 in workgroups:
                return False
        n = work_items(spec, workgroups, constants, [b.length for b in bindings])
        if n <= 0:
            return False
        params = kernel_params(spec, [self._device_ptr(b, f"{spec.name} binding") for b in bindings],
                               [b.offset for b in bindings], constants, n)
        grid = (n + BLOCK - 1) // BLOCK
        check(cu.cuLaunchKernel(self._function(spec.name), grid, 1, 1, BLOCK, 1, 1, 0, s, params, 0),
              "cuLaunchKernel")
        return True

    def timing(self, action):
        times = next((t for kind, t in action.native if kind == "timing"), None)
        if not times:
            return None
        return times[0][1], times[-1][2], times

    def close(self) -> None:
        cu = self.cu
        self._bind(force=True)
        for s in self.streams:
            cu.cuStreamSynchronize(s)
            cu.cuStreamDestroy(s)
        with self._lock:
            graphs = list(self._graphs.values()) + self._dead_graphs
            self._graphs.clear()
            self._graph_keys.clear()
            self._dead_graphs = []
        for graph in graphs:
            self._destroy_graph(graph)
        with self._lock:
            ptrs = [p for _, p in self._memory.values()] + self._to_free
            self._memory.clear()
            self._owned.clear()
            self._to_free = []
        for p in ptrs:
            cu.cuMemFree(p)
        cu.cuModuleUnload(self.module)
        cu.cuDevicePrimaryCtxRelease(self.cu_device)
