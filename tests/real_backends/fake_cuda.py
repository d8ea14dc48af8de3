"""A RECORDING FAKE of the CUDA driver API — not CUDA. It exists to exercise ``real_backends.cuda``'s
adapter and the engine around it where there is no GPU: the calls the adapter makes, their order and
their arguments (the kernel ABI marshalling, the host mirroring, event records before waits, memset
alignment). It is never a substitute for the NVRTC compile test or for runs on a real GPU.

How it fakes: "device memory" is host memory (``ctypes`` buffers whose addresses are the device
pointers); every stream operation runs immediately when enqueued (a valid serialization, because the
engine only ever waits on events that were already recorded, after the work they follow); a kernel
launch runs the NumPy reference of the kernel named by the launched symbol over ``n`` elements at
each binding's pointer + offset; events carry a fake clock. Every call is appended to ``calls``.

Handles are the real ``cuda-bindings`` types (``CUstream``, ``CUevent``, ``CUdeviceptr``…), as the real
API returns them, so the adapter's handling of them is exercised. Where no NVIDIA driver library can be
loaded (CI), every call is also made against the real ``cuda.bindings.driver`` function with the very
same arguments first: cuda-bindings converts the arguments before it loads the driver, so a wrong
argument type or shape raises ``TypeError``/``ValueError`` there — the check expects the loader's
error instead (:func:`marshals`). Where a driver exists that check is skipped (it would really call it).

The fake's driver is CUDA 13.0 by default (``driver_version``, as the 580 drivers of the GPU machines
here): ``cuModuleLoadData`` refuses PTX of a newer ISA (``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``) and a
CUBIN the device cannot run.

Driver rules it enforces beyond the arguments (pass 5; each marked where it is checked with the CUDA
documentation sentence it enforces): one primary context per device (``device_count``), retained and
released with a count — the last release resets it — and a current context per thread
(``cuCtxSetCurrent``), required by every call whose documentation lists CUDA_ERROR_INVALID_CONTEXT
(:data:`CONTEXT_BOUND`); ``cuModuleUnload`` from the current context; ``cuEventRecord``'s event and
stream of one context; live streams; and a synchronous pageable ``cuMemcpyHtoD``, whose DMA the
legacy stream completes later, unordered with the non-blocking streams' work (:meth:`FakeCuda.ordered`).
A fake that never retained a context (a test of one call's arguments) skips the context and stream rules.

Use :func:`install` (a context manager) to make ``real_backends.cuda`` see the fake; or, to run the
whole CTS port against it: ``pytest tests/cts -k "[cuda" -p tests.real_backends.fake_cuda_plugin``.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import re
import struct
import threading
import types

import numpy as np

from reference.kernels import KERNELS, run_kernel

try:
    from cuda.bindings import driver as _real  # enums, handle types, and the argument check (marshals)
except ImportError:  # the 'cuda' extra is absent: test_cuda.py skips; this module must still import
    _real = None

OK = _real.CUresult.CUDA_SUCCESS if _real is not None else 0

# What each call returns, as the real API's type (the fake's internals use plain ints).
_RETURNS = {} if _real is None else {
    "cuDeviceGet": _real.CUdevice, "cuDevicePrimaryCtxRetain": _real.CUcontext,
    "cuModuleLoadData": _real.CUmodule, "cuModuleGetFunction": _real.CUfunction,
    "cuStreamCreate": _real.CUstream, "cuEventCreate": _real.CUevent, "cuMemAlloc": _real.CUdeviceptr,
    "cuStreamEndCapture": _real.CUgraph, "cuGraphInstantiate": _real.CUgraphExec,
}
_HANDLES = tuple(set(_RETURNS.values()))

_CREATES = ("cuEventCreate", "cuStreamCreate", "cuModuleLoadData")  # (their arguments are no handles)

# The calls that need a current context (pass 5): those whose cuda-bindings docstring lists
# CUDA_ERROR_INVALID_CONTEXT among its results ("Returns ... CUDA_ERROR_INVALID_CONTEXT"), but for the
# device-level calls made before any context exists (cuDevice*, cuCtx*) and cuInit.
CONTEXT_BOUND = frozenset() if _real is None else frozenset(
    name for name in dir(_real)
    if name.startswith("cu") and not name.startswith(("cuDevice", "cuCtx", "cuInit"))
    and "CUDA_ERROR_INVALID_CONTEXT" in (getattr(getattr(_real, name), "__doc__", None) or ""))


class FakeDriverError(AssertionError):
    """The adapter used the (fake) API in a way CUDA forbids."""


class _Refused(Exception):
    """Raised by a fake call to return an error ``CUresult`` (as the real call returns it)."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


_driver_loadable = None


def _no_driver() -> bool:
    """True when the real driver library cannot be loaded here (then real calls never reach a GPU)."""
    global _driver_loadable
    if _driver_loadable is None:
        try:
            _real.cuDriverGetVersion()
            _driver_loadable = True
        except Exception:  # noqa: BLE001 - cuda-pathfinder's DynamicLibNotFoundError (or a failed load)
            _driver_loadable = False
    return not _driver_loadable


def marshals(name: str, args: tuple) -> None:
    """Make the real ``cuda.bindings.driver.<name>(*args)`` call where no driver can be loaded: its
    argument conversion runs, then the driver load fails. A TypeError/ValueError/OverflowError is an
    argument the real API would refuse: FakeDriverError. (Where a driver exists: nothing.)"""
    if _real is None or not _no_driver():
        return
    try:
        getattr(_real, name)(*args)
    except (TypeError, ValueError, OverflowError) as e:
        raise FakeDriverError(f"{name}{args!r}: cuda-bindings refuses the arguments: {e}") from None
    except Exception:  # noqa: BLE001 - the driver load failing: the arguments were converted
        return
    raise FakeDriverError(f"{name}: the real call returned although no driver can be loaded")


def _plain(arg):
    """A real handle as the fake's int (other arguments as they are)."""
    return int(arg) if isinstance(arg, _HANDLES) else arg


class FakeCuda(types.SimpleNamespace):
    def __init__(self, compute_capability=(8, 0), driver_version=13000, device_count=1, uuids=None):
        super().__init__()
        self.device_count = device_count
        # cuDeviceGetUuid's 16 bytes per ordinal (default: GPU-fa4ec0da-0000-4000-8000-<ordinal>)
        self.uuids = list(uuids) if uuids is not None else [
            bytes.fromhex(f"fa4ec0da000040008000{i:012x}") for i in range(device_count)]
        # Contexts (pass 5): one primary context per device, retained/released with a count, and the
        # context current on each CPU thread (cuCtxSetCurrent); every handle remembers its context.
        self.contexts: dict[int, dict] = {}   # CUcontext → {"device", "refs", "resets"}
        self.primary: dict[int, int] = {}     # CUdevice → its primary CUcontext
        self.owner: dict[int, tuple] = {}     # stream / event / module / allocation → (CUcontext, its resets)
        self._tls = threading.local()         # .ctx: the context current on the calling thread
        self.driver_version = driver_version  # CUDA release × 1000 + minor × 10, as cuDriverGetVersion
        self.functions: dict[int, str] = {}   # CUfunction → its entry point
        self.CUresult = _real.CUresult
        self.CUstream_flags = _real.CUstream_flags
        self.CUevent_flags = _real.CUevent_flags
        self.CUdevice_attribute = _real.CUdevice_attribute
        self.CUstreamCaptureMode = _real.CUstreamCaptureMode
        for handle in _HANDLES:
            setattr(self, handle.__name__, handle)
        self.cc = compute_capability
        self.calls: list[tuple] = []
        self.lock = threading.Lock()
        self.memory: dict[int, ctypes.Array] = {}
        self.events: dict[int, dict] = {}
        self.streams: set[int] = set()
        self.ids = itertools.count(1)
        self.clock = 0.0  # ms
        self.module_entries: set[str] = set()
        self.launched: list[tuple] = []
        # Legacy-stream host-to-device copies whose DMA "may not have completed" (pass 5): [dst, size, bytes]
        self.legacy_dma: list[list] = []
        self.capturing: dict[int, list] = {}  # stream → the operations captured into a graph
        self.graphs: dict[int, list] = {}
        self.execs: dict[int, list] = {}
        self._install_functions()

    def log(self, *call):
        with self.lock:
            self.calls.append(call)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def stream(self, s, name: str) -> None:
        """A stream operation's stream must exist: created by cuStreamCreate and not destroyed since
        (cuStreamDestroy: "Destroys the stream specified by hStream")."""
        if s not in self.streams and self.contexts:
            raise FakeDriverError(f"{name} on stream {s}: not a live stream (destroyed, or never created)")

    def run(self, s, op, name: str = "a stream operation") -> None:
        """Run a stream operation now, or append it to the graph the stream is capturing."""
        self.stream(s, name)
        captured = self.capturing.get(s)
        if captured is None:
            op()
        else:
            captured.append(op)

    def ordered(self, ptr: int, size: int, name: str) -> None:
        """Device memory a non-blocking stream's operation touches must not be the target of a
        synchronous ``cuMemcpyHtoD`` still in flight on the legacy stream (pass 5). The CUDA driver
        API's "API synchronization behavior": "For transfers from pageable host memory to device memory,
        a stream sync is performed before the copy is initiated. The function will return once the
        pageable buffer has been copied to the staging memory for DMA transfer to device memory, but the
        DMA to final destination may not have completed." — and CU_STREAM_NON_BLOCKING streams "perform
        no implicit synchronization with stream 0" (cuStreamCreate), so nothing orders that DMA before
        the stream's operation. It completes at a legacy-stream synchronization: cuCtxSynchronize,
        cuStreamSynchronize of the NULL/legacy stream, or the next synchronous cuMemcpyHtoD (its
        "stream sync ... before the copy is initiated")."""
        for dst, length, _ in self.legacy_dma:
            if dst < ptr + size and ptr < dst + length:
                raise FakeDriverError(f"{name} touches [{ptr:#x}, +{size}) while the legacy-stream DMA of a "
                                      f"pageable cuMemcpyHtoD to [{dst:#x}, +{length}) may not have completed "
                                      "(non-blocking streams do not synchronize with stream 0)")

    def legacy_sync(self) -> None:
        """The legacy stream's pending host-to-device DMAs land (see :meth:`ordered`)."""
        pending, self.legacy_dma = self.legacy_dma, []
        for dst, size, data in pending:
            ctypes.memmove(dst, data, size)

    def _mem(self, ptr: int, size: int):
        """The fake allocation holding [ptr, ptr + size): raises if the range is not inside one."""
        for base, buf in self.memory.items():
            if base <= ptr and ptr + size <= base + len(buf):
                return buf
        raise FakeDriverError(f"device range [{ptr:#x}, +{size}) is in no allocation")

    def current(self):
        """The context current on the calling thread (None: none was made current)."""
        return getattr(self._tls, "ctx", None)

    def need_context(self, name: str, handle=None) -> None:
        """The rules of a context-bound call (pass 5), checked before the fake runs it:

        * a context must be current on the calling thread — the call lists CUDA_ERROR_INVALID_CONTEXT
          among its results ("Returns: ... CUDA_ERROR_INVALID_CONTEXT", the cuda-bindings docstring
          of each name in CONTEXT_BOUND), and a thread starts with none;
        * it must not have been reset: cuDevicePrimaryCtxRelease — "The context is automatically
          reset once the last reference to it is released";
        * ``handle`` (a stream, event, module or allocation) must not belong to a context that was reset
          since it was made (the reset destroyed it).

        A standalone fake that never retained a context (a test of one call's argument rules) skips
        these checks, and :meth:`stream`'s."""
        if not self.contexts:
            return
        ctx = self.current()
        thread = threading.current_thread().name
        if ctx is None:
            raise FakeDriverError(f"{name} on thread {thread!r} with no current context "
                                  "(CUDA_ERROR_INVALID_CONTEXT: cuCtxSetCurrent first)")
        if not self.contexts[ctx]["refs"]:
            raise FakeDriverError(f"{name} on thread {thread!r}: its current context {ctx} was reset "
                                  "(cuDevicePrimaryCtxRelease released the last reference)")
        if handle is not None and handle in self.owner:
            owner, resets = self.owner[handle]
            if self.contexts[owner]["resets"] != resets:
                raise FakeDriverError(f"{name}: handle {handle:#x} belongs to context {owner}, reset since")

    def made(self, handle: int) -> int:
        """Tag a handle made by a creation call with the current context (and its reset count)."""
        ctx = self.current()
        if ctx is not None:
            self.owner[handle] = (ctx, self.contexts[ctx]["resets"])
        return handle

    def context_of(self, handle: int):
        entry = self.owner.get(handle)
        return entry[0] if entry is not None else None

    def _install_functions(self):
        fake = self

        def api(fn):
            name, returns = fn.__name__, _RETURNS.get(fn.__name__)

            def wrapper(*args):
                marshals(name, args)
                args = tuple(_plain(a) for a in args)
                fake.log(name, *args)
                if name in CONTEXT_BOUND:
                    handle = args[0] if name.startswith(("cuEvent", "cuStream", "cuModule")) and \
                        name not in _CREATES and args and isinstance(args[0], int) else None
                    fake.need_context(name, handle)
                try:
                    out = fn(*args)
                except _Refused as e:
                    return (e.result, None)
                if returns is not None:
                    out = returns(out)
                return (OK,) if out is None else (OK, out)
            wrapper.__name__ = name
            setattr(fake, name, wrapper)
            return wrapper

        @api
        def cuInit(flags):
            pass

        @api
        def cuDeviceGetCount():
            return fake.device_count

        @api
        def cuDeviceGet(ordinal):
            if not 0 <= ordinal < fake.device_count:
                raise _Refused(_real.CUresult.CUDA_ERROR_INVALID_DEVICE)
            return ordinal

        @api
        def cuDeviceGetName(length, dev):
            return b"Fake CUDA device (recording fake)".ljust(length, b"\0")

        @api
        def cuDeviceGetUuid(dev):
            if not 0 <= dev < fake.device_count:
                raise _Refused(_real.CUresult.CUDA_ERROR_INVALID_DEVICE)
            uuid = _real.CUuuid()  # (its bytes are read-only: written through its address)
            ctypes.memmove(uuid.getPtr(), fake.uuids[dev], 16)
            return uuid

        @api
        def cuDeviceGetAttribute(attr, dev):
            if attr == _real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
                return fake.cc[0]
            return fake.cc[1]

        @api
        def cuDevicePrimaryCtxRetain(dev):
            # one primary context per device: every retain of the device returns the same one
            ctx = fake.primary.get(dev)
            if ctx is None:
                ctx = fake.primary[dev] = next(fake.ids)
                fake.contexts[ctx] = {"device": dev, "refs": 0, "resets": 0}
            fake.contexts[ctx]["refs"] += 1
            return ctx

        @api
        def cuDevicePrimaryCtxRelease(dev):
            ctx = fake.primary.get(dev)
            # "Releasing a primary context that has not been previously retained will fail with
            # CUDA_ERROR_INVALID_CONTEXT."
            if ctx is None or not fake.contexts[ctx]["refs"]:
                raise FakeDriverError(f"cuDevicePrimaryCtxRelease({dev}): not retained")
            state = fake.contexts[ctx]
            state["refs"] -= 1
            if not state["refs"]:
                # "The context is automatically reset once the last reference to it is released":
                # its streams, events, modules and memory are gone (handles stay listed: leak checks)
                state["resets"] += 1

        @api
        def cuCtxSetCurrent(ctx):
            if ctx not in fake.contexts:
                raise FakeDriverError(f"cuCtxSetCurrent({ctx}): no such context")
            fake._tls.ctx = ctx  # "Binds the specified CUDA context to the calling CPU thread."

        @api
        def cuDriverGetVersion():
            return fake.driver_version

        @api
        def cuModuleLoadData(image):
            major, minor = fake.cc
            if image[:4] == b"\x7fELF":  # a CUBIN: machine code for one architecture
                machine, = struct.unpack_from("<H", image, 18)
                flags, = struct.unpack_from("<I", image, 48)
                arch = (flags >> 8) & 0xFF
                if machine != 190:  # EM_CUDA
                    raise FakeDriverError(f"cuModuleLoadData: ELF for machine {machine}, not CUDA")
                if arch // 10 != major or arch % 10 > minor:  # runs forward within its major version only
                    raise _Refused(_real.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU)
                fake.module_kind, fake.module_arch = "cubin", arch
                fake.module_entries = {n.decode() for n in re.findall(rb"\.text\.(\w+)\0", image)}
                return fake.made(next(fake.ids))
            if not image.endswith(b"\0"):
                raise FakeDriverError("cuModuleLoadData: PTX must be NUL-terminated")
            text = image.rstrip(b"\0").decode()
            version = re.search(r"^\.version (\d+)\.(\d+)$", text, re.M)
            target = re.search(r"^\.target sm_(\d+)$", text, re.M)
            if not version or not target:
                raise FakeDriverError("cuModuleLoadData expects PTX or a CUBIN")
            # the PTX ISA a driver JITs: 9.x for CUDA 13.x, 8.x for 12.x
            isa = (fake.driver_version // 1000 - 4, fake.driver_version % 1000 // 10)
            if (int(version[1]), int(version[2])) > isa:
                raise _Refused(_real.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
            if int(target[1]) > major * 10 + minor:
                raise _Refused(_real.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU)
            fake.module_kind, fake.module_arch = "ptx", int(target[1])
            fake.module_entries = set(re.findall(r"\.entry\s+(\w+)", text))
            return fake.made(next(fake.ids))

        @api
        def cuModuleUnload(module):
            # "Unloads a module hmod from the current context."
            if fake.context_of(module) != fake.current():
                raise FakeDriverError(f"cuModuleUnload: module {module} belongs to context "
                                      f"{fake.context_of(module)}, but context {fake.current()} is current")

        @api
        def cuModuleGetFunction(module, name):
            name = name.decode()
            if name not in fake.module_entries:
                raise FakeDriverError(f"no entry {name} in the module")
            f = next(fake.ids)
            fake.functions[f] = name
            return f

        @api
        def cuStreamCreate(flags):
            if flags != _real.CUstream_flags.CU_STREAM_NON_BLOCKING:
                raise FakeDriverError("dispatch streams must be CU_STREAM_NON_BLOCKING")
            s = fake.made(next(fake.ids))
            fake.streams.add(s)
            return s

        @api
        def cuStreamDestroy(s):
            fake.stream(s, "cuStreamDestroy")
            fake.streams.discard(s)

        @api
        def cuStreamSynchronize(s):
            if s in (0, 1):  # the NULL stream, CU_STREAM_LEGACY
                fake.legacy_sync()
                return
            fake.stream(s, "cuStreamSynchronize")
            if s in fake.capturing:
                raise FakeDriverError("cuStreamSynchronize on a capturing stream")

        @api
        def cuEventCreate(flags):
            e = fake.made(next(fake.ids))  # "Creates an event *phEvent for the current context"
            fake.events[e] = {"recorded": False, "t": None, "flags": int(flags)}
            return e

        @api
        def cuEventDestroy(e):
            if fake.events.pop(e, None) is None:
                raise FakeDriverError(f"event {e} destroyed twice")

        @api
        def cuEventRecord(e, s):
            fake.stream(s, "cuEventRecord")
            if e not in fake.events:
                raise FakeDriverError(f"cuEventRecord: event {e} does not exist (destroyed?)")
            # "hEvent and hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE"
            if fake.context_of(e) != fake.context_of(s):
                raise FakeDriverError(f"cuEventRecord: event {e} (context {fake.context_of(e)}) and stream {s} "
                                      f"(context {fake.context_of(s)}) are from different contexts")
            if s in fake.capturing:
                raise FakeDriverError("event recorded on a capturing stream")
            with fake.lock:
                fake.clock += 0.001
                fake.events[e].update(recorded=True, t=fake.clock)

        @api
        def cuStreamWaitEvent(s, e, flags):
            fake.stream(s, "cuStreamWaitEvent")
            if not fake.events[e]["recorded"]:
                raise FakeDriverError(f"stream {s} waits on event {e} that was never recorded")

        @api
        def cuEventSynchronize(e):
            if not fake.events[e]["recorded"]:
                raise FakeDriverError(f"synchronize on event {e} that was never recorded")

        @api
        def cuEventElapsedTime(a, b):
            # "If cuEventRecord() has not been called on either event then CUDA_ERROR_INVALID_HANDLE is
            # returned."
            if not (fake.events[a]["recorded"] and fake.events[b]["recorded"]):
                raise FakeDriverError("cuEventElapsedTime on an event never recorded")
            no_timing = int(_real.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            if (fake.events[a]["flags"] | fake.events[b]["flags"]) & no_timing:
                raise FakeDriverError("cuEventElapsedTime on an event created with CU_EVENT_DISABLE_TIMING")
            return fake.events[b]["t"] - fake.events[a]["t"]

        @api
        def cuMemAlloc(size):
            buf = (ctypes.c_char * size)()
            ptr = fake.made(ctypes.addressof(buf))
            fake.memory[ptr] = buf
            return ptr

        @api
        def cuMemFree(ptr):
            buf = fake.memory.get(int(ptr))
            if buf is not None:  # (the freed range's pending legacy DMA goes with it)
                fake.legacy_dma = [d for d in fake.legacy_dma if not ptr <= d[0] < ptr + len(buf)]
            if fake.memory.pop(int(ptr), None) is None:
                raise FakeDriverError(f"cuMemFree of {ptr:#x}: not allocated")

        @api
        def cuMemcpyHtoDAsync(dst, src, size, s):
            fake.stream(s, "cuMemcpyHtoDAsync")
            if s in fake.capturing:
                raise FakeDriverError("a pageable host-to-device copy captured into a graph")
            fake._mem(dst, size)
            fake.ordered(dst, size, "cuMemcpyHtoDAsync")
            ctypes.memmove(dst, src, size)

        @api
        def cuMemcpyHtoD(dst, src, size):
            # synchronous, on the legacy stream: the pageable source is staged now, the DMA lands at the
            # next legacy-stream synchronization (FakeCuda.ordered)
            fake._mem(dst, size)
            fake.legacy_sync()  # "a stream sync is performed before the copy is initiated"
            fake.legacy_dma.append([dst, size, ctypes.string_at(src, size)])

        @api
        def cuCtxSynchronize():
            fake.legacy_sync()

        @api
        def cuMemcpyDtoHAsync(dst, src, size, s):
            fake.stream(s, "cuMemcpyDtoHAsync")
            if s in fake.capturing:
                raise FakeDriverError("a device-to-host copy captured into a graph")
            fake._mem(src, size)
            fake.ordered(src, size, "cuMemcpyDtoHAsync")
            ctypes.memmove(dst, src, size)

        @api
        def cuMemcpyDtoDAsync(dst, src, size, s):
            fake._mem(src, size)
            fake._mem(dst, size)
            if src < dst + size and dst < src + size:
                # CUDA copies are not memmove: overlapping ranges give undefined results on a GPU, so the
                # fake refuses them (ctypes.memmove would hide a missing staging copy)
                raise FakeDriverError(f"cuMemcpyDtoDAsync: overlapping ranges [{src:#x}, +{size}) → "
                                      f"[{dst:#x}, +{size}) (undefined on CUDA)")

            def op():  # (a graph runs it later: its memory must still be allocated then)
                fake._mem(src, size)
                fake._mem(dst, size)
                fake.ordered(src, size, "cuMemcpyDtoDAsync (source)")
                fake.ordered(dst, size, "cuMemcpyDtoDAsync (target)")
                ctypes.memmove(dst, src, size)
            fake.run(s, op)

        @api
        def cuStreamBeginCapture(s, mode):
            fake.stream(s, "cuStreamBeginCapture")
            if mode != _real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED:
                raise FakeDriverError("capture must be relaxed: the completion thread calls CUDA meanwhile")
            if s in fake.capturing:
                raise FakeDriverError("stream already capturing")
            fake.capturing[s] = []

        @api
        def cuStreamEndCapture(s):
            g = next(fake.ids)
            fake.graphs[g] = fake.capturing.pop(s)
            return g

        @api
        def cuGraphInstantiate(g, flags):
            e = next(fake.ids)
            fake.execs[e] = list(fake.graphs[g])
            return e

        @api
        def cuGraphLaunch(e, s):
            fake.stream(s, "cuGraphLaunch")
            if s in fake.capturing:
                raise FakeDriverError("graph launch while capturing")
            for op in fake.execs[e]:
                op()

        @api
        def cuGraphExecDestroy(e):
            del fake.execs[e]

        @api
        def cuGraphDestroy(g):
            del fake.graphs[g]

        def memset(width, dtype):
            def fill(dst, value, count, s):
                if dst % width:
                    raise FakeDriverError(f"cuMemsetD{8 * width}Async at {dst:#x}: not {width}-byte aligned")
                fake._mem(dst, count * width)
                def op():
                    fake.ordered(dst, count * width, f"cuMemsetD{8 * width}Async")
                    np.ctypeslib.as_array((ctypes.c_char * (count * width)).from_address(dst)).view(dtype)[:] = value
                fake.run(s, op)
            return fill

        for width, dtype in ((1, np.uint8), (2, np.uint16), (4, np.uint32)):
            f = memset(width, dtype)
            f.__name__ = f"cuMemsetD{8 * width}Async"
            api(f)

        @api
        def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra):
            values, kinds = params
            if len(values) != len(kinds):
                raise FakeDriverError("kernelParams: values and types differ in length")
            f = fake.functions[f]
            spec = KERNELS[f[len("hal_"):]]
            b, c = spec.binding_count, spec.constant_count
            # builtin.cu: a pointer and an `unsigned long long` offset per binding, 32-bit constants and n
            want = [ctypes.c_void_p, ctypes.c_uint64] * b + [ctypes.c_uint32] * (c + 1)
            if list(kinds) != want:
                raise FakeDriverError(f"{f}: parameter types {kinds} are not the kernel ABI's {want}")
            n = values[-1]
            if gx * bx < n or (gy, gz, by, bz) != (1, 1, 1, 1):
                raise FakeDriverError(f"{f}: grid {gx}x{bx} does not cover n={n}")
            for k in range(b):
                fake._mem(values[2 * k] + values[2 * k + 1], 4 * n)
            constants = tuple(values[2 * b:2 * b + c])

            def op():
                for k in range(b):
                    fake.ordered(values[2 * k] + values[2 * k + 1], 4 * n, f"cuLaunchKernel {f}")
                views = [memoryview((ctypes.c_char * (4 * n)).from_address(values[2 * k] + values[2 * k + 1])).cast("B")
                         for k in range(b)]
                fake.launched.append((f, n, constants))
                run_kernel(spec, (n, 1, 1), constants, views)
            fake.run(s, op)

        @api
        def cuGetErrorName(err):
            return err.name.encode()


@contextlib.contextmanager
def install(fake: FakeCuda | None = None):
    """Make ``real_backends.cuda`` use ``fake`` (a new :class:`FakeCuda` by default); yields it."""
    from real_backends.cuda import adapter

    fake = fake or FakeCuda()
    saved = adapter._cu
    adapter._cu = lambda: fake
    try:
        yield fake
    finally:
        adapter._cu = saved
