"""A RECORDING FAKE of the CUDA driver API — not CUDA. It exists to exercise ``real_backends.cuda``'s
adapter and the engine around it where there is no GPU: the calls the adapter makes, their order and
their arguments (the kernel ABI marshalling, the host mirroring, event records before waits, memset
alignment). It is never a substitute for the NVRTC compile test or for runs on a real GPU.

How it fakes: "device memory" is host memory (``ctypes`` buffers whose addresses are the device
pointers); every stream operation runs immediately when enqueued (a valid serialization, because the
engine only ever waits on events that were already recorded, after the work they follow); a kernel
launch runs the NumPy reference of the kernel named by the launched symbol over ``n`` elements at
each binding's pointer + offset; events carry a fake clock. Every call is appended to ``calls``.

Use :func:`install` (a context manager) to make ``real_backends.cuda`` see the fake; or, to run the
whole CTS port against it: ``pytest tests/cts -k "[cuda" -p tests.real_backends.fake_cuda_plugin``.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import re
import threading
import types

import numpy as np

from reference.kernels import KERNELS, run_kernel

try:
    from cuda.bindings import driver as _real  # the enums only; nothing here calls the real driver
except ImportError:  # the 'cuda' extra is absent: test_cuda.py skips; this module must still import
    _real = None

OK = _real.CUresult.CUDA_SUCCESS if _real is not None else 0


class FakeDriverError(AssertionError):
    """The adapter used the (fake) API in a way CUDA forbids."""


class FakeCuda(types.SimpleNamespace):
    def __init__(self, compute_capability=(8, 0)):
        super().__init__()
        self.CUresult = _real.CUresult
        self.CUstream_flags = _real.CUstream_flags
        self.CUevent_flags = _real.CUevent_flags
        self.CUdevice_attribute = _real.CUdevice_attribute
        self.CUstreamCaptureMode = _real.CUstreamCaptureMode
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
        self.capturing: dict[int, list] = {}  # stream → the operations captured into a graph
        self.graphs: dict[int, list] = {}
        self.execs: dict[int, list] = {}
        self._install_functions()

    def log(self, *call):
        with self.lock:
            self.calls.append(call)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def run(self, s, op) -> None:
        """Run a stream operation now, or append it to the graph the stream is capturing."""
        captured = self.capturing.get(s)
        if captured is None:
            op()
        else:
            captured.append(op)

    def _mem(self, ptr: int, size: int):
        """The fake allocation holding [ptr, ptr + size): raises if the range is not inside one."""
        for base, buf in self.memory.items():
            if base <= ptr and ptr + size <= base + len(buf):
                return buf
        raise FakeDriverError(f"device range [{ptr:#x}, +{size}) is in no allocation")

    def _install_functions(self):
        fake = self

        def api(fn):
            def wrapper(*args):
                fake.log(fn.__name__, *args)
                out = fn(*args)
                return (OK,) if out is None else (OK, out)
            wrapper.__name__ = fn.__name__
            setattr(fake, fn.__name__, wrapper)
            return wrapper

        @api
        def cuInit(flags):
            pass

        @api
        def cuDeviceGetCount():
            return 1

        @api
        def cuDeviceGet(ordinal):
            return ordinal

        @api
        def cuDeviceGetName(length, dev):
            return b"Fake CUDA device (recording fake)".ljust(length, b"\0")

        @api
        def cuDeviceGetAttribute(attr, dev):
            if attr == _real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
                return fake.cc[0]
            return fake.cc[1]

        @api
        def cuDevicePrimaryCtxRetain(dev):
            return "ctx"

        @api
        def cuDevicePrimaryCtxRelease(dev):
            pass

        @api
        def cuCtxSetCurrent(ctx):
            pass

        @api
        def cuModuleLoadData(image):
            text = image.rstrip(b"\0").decode()
            if ".version" not in text:
                raise FakeDriverError("cuModuleLoadData expects PTX")
            fake.module_entries = set(re.findall(r"\.entry\s+(\w+)", text))
            return "module"

        @api
        def cuModuleUnload(module):
            pass

        @api
        def cuModuleGetFunction(module, name):
            name = name.decode()
            if name not in fake.module_entries:
                raise FakeDriverError(f"no entry {name} in the module")
            return name

        @api
        def cuStreamCreate(flags):
            if flags != _real.CUstream_flags.CU_STREAM_NON_BLOCKING:
                raise FakeDriverError("dispatch streams must be CU_STREAM_NON_BLOCKING")
            s = next(fake.ids)
            fake.streams.add(s)
            return s

        @api
        def cuStreamDestroy(s):
            fake.streams.discard(s)

        @api
        def cuStreamSynchronize(s):
            if s in fake.capturing:
                raise FakeDriverError("cuStreamSynchronize on a capturing stream")

        @api
        def cuEventCreate(flags):
            e = next(fake.ids)
            fake.events[e] = {"recorded": False, "t": None, "flags": int(flags)}
            return e

        @api
        def cuEventDestroy(e):
            if fake.events.pop(e, None) is None:
                raise FakeDriverError(f"event {e} destroyed twice")

        @api
        def cuEventRecord(e, s):
            if s in fake.capturing:
                raise FakeDriverError("event recorded on a capturing stream")
            with fake.lock:
                fake.clock += 0.001
                fake.events[e].update(recorded=True, t=fake.clock)

        @api
        def cuStreamWaitEvent(s, e, flags):
            if not fake.events[e]["recorded"]:
                raise FakeDriverError(f"stream {s} waits on event {e} that was never recorded")

        @api
        def cuEventSynchronize(e):
            if not fake.events[e]["recorded"]:
                raise FakeDriverError(f"synchronize on event {e} that was never recorded")

        @api
        def cuEventElapsedTime(a, b):
            no_timing = int(_real.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            if (fake.events[a]["flags"] | fake.events[b]["flags"]) & no_timing:
                raise FakeDriverError("cuEventElapsedTime on an event created with CU_EVENT_DISABLE_TIMING")
            return fake.events[b]["t"] - fake.events[a]["t"]

        @api
        def cuMemAlloc(size):
            buf = (ctypes.c_char * size)()
            ptr = ctypes.addressof(buf)
            fake.memory[ptr] = buf
            return ptr

        @api
        def cuMemFree(ptr):
            if fake.memory.pop(int(ptr), None) is None:
                raise FakeDriverError(f"cuMemFree of {ptr:#x}: not allocated")

        @api
        def cuMemcpyHtoDAsync(dst, src, size, s):
            if s in fake.capturing:
                raise FakeDriverError("a pageable host-to-device copy captured into a graph")
            fake._mem(dst, size)
            ctypes.memmove(dst, src, size)

        @api
        def cuMemcpyHtoD(dst, src, size):
            fake._mem(dst, size)
            ctypes.memmove(dst, src, size)

        @api
        def cuMemcpyDtoHAsync(dst, src, size, s):
            if s in fake.capturing:
                raise FakeDriverError("a device-to-host copy captured into a graph")
            fake._mem(src, size)
            ctypes.memmove(dst, src, size)

        @api
        def cuMemcpyDtoDAsync(dst, src, size, s):
            fake._mem(src, size)
            fake._mem(dst, size)
            fake.run(s, lambda: ctypes.memmove(dst, src, size))

        @api
        def cuStreamBeginCapture(s, mode):
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
            spec = KERNELS[f[len("hal_"):]]
            b, c = spec.binding_count, spec.constant_count
            want = [ctypes.c_void_p, ctypes.c_uint32] * b + [ctypes.c_uint32] * (c + 1)
            if list(kinds) != want:
                raise FakeDriverError(f"{f}: parameter types {kinds} are not the kernel ABI's {want}")
            n = values[-1]
            if gx * bx < n or (gy, gz, by, bz) != (1, 1, 1, 1):
                raise FakeDriverError(f"{f}: grid {gx}x{bx} does not cover n={n}")
            for k in range(b):
                fake._mem(values[2 * k] + values[2 * k + 1], 4 * n)
            constants = tuple(values[2 * b:2 * b + c])

            def op():
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
