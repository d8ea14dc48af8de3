"""The ``metal`` backend's platform-independent parts (the adapter itself needs macOS and is untested in
CI): the resource-option bits it derives from ``reference.utils.metal_storage``, the planner it
encodes through (``reference.utils.command_segments``, tested further in tests/reference), and the
encoding of copies between overlapping ranges of one buffer (``MetalAdapter._encode`` against a small
stand-in for the few Metal objects it calls — not Metal)."""

from __future__ import annotations

import struct
import sys
import threading
import types

import pytest

from real_backends.metal import adapter
from reference import hal
from reference.hal import MemoryType as MT
from reference.utils.command_segments import MACOS, Encoder, plan_segments


@pytest.mark.parametrize("memory_type, unified, storage, cache", [
    (MT.DEVICE_LOCAL, True, "Private", "WriteCombined"),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, True, "Shared", "WriteCombined"),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, False, "Managed", "WriteCombined"),
    (MT.HOST_LOCAL | MT.DEVICE_VISIBLE | MT.HOST_CACHED, True, "Shared", "DefaultCache"),
])
def test_resource_option_bits(memory_type, unified, storage, cache):
    bits = adapter.options_bits(memory_type, unified)
    # MTLResourceStorageModeShift = 4, MTLResourceCPUCacheModeShift = 0 (Metal/MTLResource.h)
    assert (bits >> 4) & 0xF == {"Shared": 0, "Managed": 1, "Private": 2}[storage]
    assert bits & 0xF == {"DefaultCache": 0, "WriteCombined": 1}[cache]
    assert not bits & (1 << 8)  # hazard tracking: Tracked


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_metal_adapter_refuses_off_macos():
    with pytest.raises(hal.HalError) as e:
        adapter.find_device()
    assert e.value.code == hal.StatusCode.UNAVAILABLE


@pytest.mark.gpu
def test_metal_smoke_on_a_mac():
    """On a Mac with the 'metal' extra: every kernel against the NumPy reference."""
    import numpy as np

    from reference.kernels import LIBRARY

    from .harness import dispatch, expected, random_inputs
    from tests.conftest import open_device

    with open_device("metal", "gpu test: no Metal device here") as dev:
        rng = np.random.default_rng(3)
        for spec in LIBRARY:
            workgroups, constants, datas = random_inputs(spec.name, rng)
            assert dispatch(dev, spec.name, workgroups, constants, datas, offset=8) == \
                expected(spec.name, workgroups, constants, datas), spec.name


# -- copies between binding-table slots aliasing overlapping ranges of one buffer ------------------------

class _Buffer:
    """An ``MTLBuffer`` stand-in: its bytes."""

    def __init__(self, length, bits=0):
        self.data, self.bits = bytearray(length), bits

    def length(self):
        return len(self.data)


class _Pipeline:
    def __init__(self, name):
        self.name = name

    def maxTotalThreadsPerThreadgroup(self):
        return 256


class _Device:
    def __init__(self):
        self.made = []

    def newBufferWithLength_options_(self, length, bits):
        self.made.append(_Buffer(length, bits))
        return self.made[-1]

    def newBufferWithBytes_length_options_(self, data, length, bits):
        buf = _Buffer(length, bits)
        buf.data[:] = data
        return buf

    def newComputePipelineStateWithFunction_error_(self, fn, err):
        return _Pipeline(fn), None


def _overlap(a, a_off, b, b_off, n):
    return a is b and a_off < b_off + n and b_off < a_off + n


class _Blit:
    """Blit copies run in order; overlapping ranges of one buffer are refused, as Metal's API validation
    does (and the hardware does not promise memmove)."""

    def __init__(self, log):
        self.log = log

    def copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(self, a, a_off, b, b_off, n):
        assert not _overlap(a, a_off, b, b_off, n), "blit copy between overlapping ranges of one buffer"
        self.log.append(("copyFromBuffer", a, a_off, b, b_off, n))
        b.data[b_off:b_off + n] = a.data[a_off:a_off + n]

    def endEncoding(self):
        self.log.append(("end",))


class _Compute:
    """A concurrent compute encoder: dispatches between memory barriers may run at the same time, so
    one reading bytes another of them writes is a race (refused), as is a copy kernel between
    overlapping ranges (one thread per byte)."""

    def __init__(self, log):
        self.log, self.state, self.buffers, self.params, self.written = log, None, {}, b"", []

    def setComputePipelineState_(self, p):
        self.state = p

    def setBuffer_offset_atIndex_(self, buf, offset, index):
        assert offset == 0
        self.buffers[index] = buf

    def setBytes_length_atIndex_(self, data, length, index):
        self.params = bytes(data)

    def dispatchThreads_threadsPerThreadgroup_(self, grid, group):
        assert self.state.name == "copy_buffer_generic", self.state.name
        a, b = self.buffers[0], self.buffers[1]
        a_off, b_off, n = struct.unpack("<3I", self.params)
        assert grid[0] >= n
        assert not _overlap(a, a_off, b, b_off, n), "copy kernel between overlapping ranges of one buffer"
        assert not any(w is a and w_off < a_off + n and a_off < w_off + w_n for w, w_off, w_n in self.written), \
            "a dispatch reads what a concurrent one writes (no memory barrier between them)"
        self.log.append(("copy_buffer_generic", a, a_off, b, b_off, n))
        b.data[b_off:b_off + n] = a.data[a_off:a_off + n]
        self.written.append((b, b_off, n))

    def memoryBarrierWithScope_(self, scope):
        self.log.append(("barrier",))
        self.written = []

    def endEncoding(self):
        self.log.append(("end",))


class _CommandBuffer:
    def __init__(self):
        self.log = []

    def blitCommandEncoder(self):
        return _Blit(self.log)

    def computeCommandEncoderWithDispatchType_(self, kind):
        assert kind == adapter.DISPATCH_CONCURRENT
        return _Compute(self.log)


def _encoding_adapter():
    """A ``MetalAdapter`` over the stand-ins (``__init__`` needs macOS: its fields set here)."""
    ad = object.__new__(adapter.MetalAdapter)
    ad.Metal = types.SimpleNamespace(MTLSizeMake=lambda *xyz: xyz)
    ad.device, ad.unified, ad.pipelines, ad._buffers = _Device(), True, {}, {}
    ad.library = types.SimpleNamespace(newFunctionWithName_=lambda name: name)
    ad._lock = threading.Lock()
    return ad


@pytest.mark.parametrize("source, target, length, method", [
    (0, 4, 8, "copyFromBuffer"), (4, 0, 8, "copyFromBuffer"),             # aligned: the blit encoder
    (1, 3, 7, "copy_buffer_generic"), (3, 1, 7, "copy_buffer_generic"),   # unaligned: the copy kernel
])
def test_overlapping_copy_is_staged_through_a_temporary(source, target, length, method):
    """A copy between binding-table slots aliasing overlapping ranges of one buffer is encoded as
    source → a temporary Private buffer → target in the planned encoder (a memory barrier between the
    two kernels of a concurrent compute encoder), and the temporary is kept: memmove."""
    ad = _encoding_adapter()
    with hal.create_device("local-sync") as dev:
        b = dev.allocator.allocate_buffer(16)
        cb = dev.create_command_buffer(binding_capacity=2)
        cb.begin()
        cb.copy_buffer(hal.BufferRef(slot=0, offset=0, length=length), hal.BufferRef(slot=1, offset=0, length=length))
        cb.end()
        commands = cb.resolve([hal.BufferRef(b, source, 12), hal.BufferRef(b, target, 12)])
        plan = plan_segments(commands, MACOS)
        assert [s.method for seg in plan if isinstance(seg, Encoder) for s in seg.steps] == [method]
        mtl = ad._buffer(commands[0].accesses[0][0], "test")
        mtl.data[:] = bytes(range(16))
        mcb, keep = _CommandBuffer(), []
        for seg in plan:
            assert ad._encode(None, mcb, seg, {c.index: c for c in commands}, keep) is mcb
    expect = bytearray(range(16))
    expect[target:target + length] = bytes(range(source, source + length))
    assert mtl.data == expect
    temp = keep[-1]
    assert temp is ad.device.made[-1] and temp.length() == length
    assert temp.bits == adapter.STORAGE["Private"] << adapter.STORAGE_SHIFT
    steps = [entry for entry in mcb.log if entry[0] != "end"]
    hops = [(method, mtl, source, temp, 0, length), (method, temp, 0, mtl, target, length)]
    assert steps == (hops if method == "copyFromBuffer" else [hops[0], ("barrier",), hops[1]])


def test_copy_hops():
    assert adapter.copy_hops("a", 1, "b", 2) == [("a", 1, "b", 2)]
    assert adapter.copy_hops("a", 1, "a", 2, "t") == [("a", 1, "t", 0), ("t", 0, "a", 2)]
