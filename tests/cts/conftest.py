"""Harness of the HAL conformance test suite (IREE's CTS ported to pytest; docs/cts.md is the map).

Every CTS test carries its IREE id(s) with ``@pytest.mark.iree("Suite.Test", ...)`` (the first id is the
HEAD [H] name, further ids the classic [C] names it also covers). Tests that take the ``device`` fixture
run once per device that a registered driver offers (``hal.available_devices()``); a device joins the
suite by registering a driver. Per device:

* ``@pytest.mark.requires("tag", ...)`` skips, as IREE does, when the device lacks a capability tag
  (``async_queue``, ``events``, ``host_calls``, ``mapping``, ``indirect``, ``file_io``);
* ``DeviceInfo.cts_unsupported`` ("Suite.Test" → reason) skips a test that IREE does not run there;
* a device whose creation raises ``UNAVAILABLE`` is skipped.

Command-buffer suites take the ``recording_mode`` fixture and run ``direct`` everywhere and ``indirect``
(buffer refs through binding-table slots) on devices tagged ``indirect``, like IREE's ``CTS_Indirect``.

Every wait that IREE makes with an infinite timeout is bounded here by ``WAIT`` seconds, and every thread
is joined with a timeout: a hang fails the test, it never blocks CI. Host pauses use ``device.sleep``
(virtual on simulated devices); no result depends on wall-clock timing.
"""

from __future__ import annotations

import functools
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from reference import hal

S = hal.StatusCode
ALL, ANY = hal.WaitMode.ALL, hal.WaitMode.ANY
MT, BU, MA = hal.MemoryType, hal.BufferUsage, hal.MemoryAccess
WHOLE = hal.WHOLE_BUFFER
FAILURE_VALUE = hal.SEMAPHORE_FAILURE_VALUE

WAIT = 10.0  # seconds: the bound used wherever IREE's tests wait forever (as tests/conftest.py)
RECORDING_MODES = ("direct", "indirect")
_HERE = Path(__file__).resolve().parent

# -- registration, parametrization, skips ------------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "iree(*ids): the IREE CTS test id(s) 'Suite.Test' this test ports")
    config.addinivalue_line("markers", "requires(*tags): CTS capability tags the device must declare")


@functools.lru_cache(maxsize=None)
def _device_infos() -> tuple:
    return tuple(hal.available_devices())


def pytest_generate_tests(metafunc):
    if "device_info" not in metafunc.fixturenames:
        return
    infos = _device_infos()
    if "recording_mode" in metafunc.fixturenames:
        combos = [(info, mode) for info in infos for mode in RECORDING_MODES
                  if mode == "direct" or "indirect" in info.capabilities]
        metafunc.parametrize(("device_info", "recording_mode"), combos, indirect=["device_info"],
                             ids=[f"{info.uri}-{mode}" for info, mode in combos])
    else:
        metafunc.parametrize("device_info", infos, indirect=True, ids=[info.uri for info in infos])


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.path).resolve()
        if _HERE in path.parents and item.get_closest_marker("iree") is None:
            raise pytest.UsageError(f"{item.nodeid}: every CTS test needs @pytest.mark.iree('Suite.Test')")


@pytest.fixture
def device_info(request) -> hal.DeviceInfo:
    """The DeviceInfo this test runs on; skips where IREE would not run the test on that device."""
    info = request.param
    for marker in request.node.iter_markers("requires"):
        for tag in marker.args:
            if tag not in info.capabilities:
                pytest.skip(f"device lacks capability {tag}")
    marker = request.node.get_closest_marker("iree")
    for test_id in marker.args if marker else ():
        reason = info.cts_unsupported.get(test_id)
        if reason is not None:
            pytest.skip(f"{test_id} unsupported on {info.uri}: {reason}")
    return info


@pytest.fixture
def device(device_info):
    try:
        dev = hal.create_device(device_info.uri)
    except hal.HalError as e:
        if e.code == S.UNAVAILABLE:
            pytest.skip(f"device {device_info.uri} unavailable: {e.message}")
        raise
    try:
        yield dev
    finally:
        dev.close()


@pytest.fixture
def executable(device):
    """The builtin kernel library (IREE's CTS executables: abs, write_constants, scale_and_offset, …)."""
    return device.load_executable()


# -- statuses, semaphores, threads ------------------------------------------------------------------

def expect_error(code, fn, *args, **kwargs) -> hal.HalError:
    """Call ``fn``; it must raise HalError with ``code``. Returns the error."""
    with pytest.raises(hal.HalError) as ei:
        fn(*args, **kwargs)
    assert ei.value.code == code, f"expected {S(code).name}, got {ei.value.code.name}: {ei.value.message}"
    return ei.value


def lwait(device, timepoints, timeout=WAIT) -> None:
    """IREE ``semaphore_list_wait`` (wait-all)."""
    device.wait_semaphores(ALL, list(timepoints), timeout)


def lsig(timepoints) -> None:
    """IREE ``semaphore_list_signal``: signal each in order."""
    for sem, value in timepoints:
        sem.signal(value)


def sl(device, inits, targets):
    """IREE's ``SemaphoreList`` helper ``SL(inits, targets)``: fresh semaphores paired with targets."""
    return [(device.create_semaphore(v), t) for v, t in zip(inits, targets, strict=True)]


def join(thread: threading.Thread, timeout: float = WAIT) -> None:
    thread.join(timeout)
    assert not thread.is_alive(), f"thread {thread.name} did not finish within {timeout} s"


class HostThread(threading.Thread):
    """A host thread whose result or exception is handed back by :meth:`finish` (joined with a timeout)."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True, name=f"cts:{getattr(fn, '__name__', 'thread')}")
        self._fn, self._args = fn, args
        self.result = None
        self.error: BaseException | None = None

    def run(self):
        try:
            self.result = self._fn(*self._args)
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread by finish()
            self.error = e

    def finish(self, timeout: float = WAIT):
        join(self, timeout)
        if self.error is not None:
            raise self.error
        return self.result


def spawn(fn, *args) -> HostThread:
    t = HostThread(fn, *args)
    t.start()
    return t


# -- bytes -----------------------------------------------------------------------------------------

def u32s(*values) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def u16s(*values) -> bytes:
    return struct.pack(f"<{len(values)}H", *values)


def i32s(*values) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)


def f32s(*values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def det(n: int) -> bytes:
    """IREE ``MakeDeterministicBytes``: byte i = (i*131 + (i>>7)*17 + 0x5A) & 0xFF."""
    i = np.arange(n, dtype=np.int64)
    return ((i * 131 + (i >> 7) * 17 + 0x5A) & 0xFF).astype(np.uint8).tobytes()


def fillexp(size: int, offset: int, length: int, pattern: int, pattern_length: int) -> bytes:
    """IREE ``MakeFilledBytes``: zeros except [offset, offset+length) = the little-endian pattern repeated."""
    pat = pattern.to_bytes(pattern_length, "little")
    assert length % pattern_length == 0
    return bytes(offset) + pat * (length // pattern_length) + bytes(size - offset - length)


# -- buffers (IREE CtsTestBase helpers, [H] variants) -----------------------------------------------

def alloc_uninit(device, n: int):
    """``UNINIT(n)``: DEVICE_LOCAL|HOST_VISIBLE, DISPATCH_STORAGE|TRANSFER|MAPPING."""
    return device.allocator.allocate_buffer(n, MT.DEVICE_LOCAL | MT.HOST_VISIBLE,
                                            BU.DISPATCH_STORAGE | BU.TRANSFER | BU.MAPPING)


def zeroed(device, n: int):
    """``ZEROED(n)``."""
    buf = alloc_uninit(device, n)
    buf.map_zero(0, WHOLE)
    return buf


def filled(device, n: int, pattern: int, pattern_length: int = 4):
    """``FILLED(n, p)``: OPTIMAL_FOR_DEVICE|HOST_VISIBLE, DISPATCH_STORAGE|TRANSFER|MAPPING, map_fill."""
    buf = device.allocator.allocate_buffer(n, MT.OPTIMAL_FOR_DEVICE | MT.HOST_VISIBLE,
                                           BU.DISPATCH_STORAGE | BU.TRANSFER | BU.MAPPING)
    buf.map_fill(0, WHOLE, pattern, pattern_length)
    return buf


def hostbuf(device, n: int):
    """``HOSTBUF(n)``: HOST_LOCAL|DEVICE_VISIBLE, DISPATCH_STORAGE|TRANSFER|MAPPING."""
    return device.allocator.allocate_buffer(n, MT.HOST_LOCAL | MT.DEVICE_VISIBLE,
                                            BU.DISPATCH_STORAGE | BU.TRANSFER | BU.MAPPING)


def with_data(device, data: bytes):
    """``WITH_DATA(bytes)``: UNINIT(len) then queue_update([], SL({0},{1})) and wait."""
    buf = alloc_uninit(device, len(data))
    done = device.create_semaphore(0)
    device.queue_update([], [(done, 1)], data, 0, buf, 0, len(data))
    done.wait(1, WAIT)
    return buf


def _mappable(buf) -> bool:
    return bool(buf.memory_type & MT.HOST_VISIBLE) and bool(buf.allowed_usage & BU.MAPPING_SCOPED)


def read_bytes(device, buf, offset: int = 0, length: int = WHOLE) -> bytes:
    """``READ_BYTES``: map_read when the buffer is host-visible and mappable, else copy through a
    host-visible staging buffer on the queue (IREE reads through a file; there are no files here)."""
    if length == WHOLE:
        length = buf.byte_length - offset
    if _mappable(buf):
        return buf.map_read(offset, length)
    staging = hostbuf(device, length)
    done = device.create_semaphore(0)
    device.queue_copy([], [(done, 1)], buf, offset, staging, 0, length)
    done.wait(1, WAIT)
    return staging.map_read(0, length)


def write_bytes(device, buf, offset: int, data: bytes) -> None:
    """``h2d``: map_write when possible, else queue_update and wait."""
    if _mappable(buf):
        buf.map_write(offset, data)
        return
    done = device.create_semaphore(0)
    device.queue_update([], [(done, 1)], data, 0, buf, offset, len(data))
    done.wait(1, WAIT)


# -- command buffers ---------------------------------------------------------------------------------

def submit_and_wait(device, command_buffer, binding_table=None) -> None:
    """``SUBMIT_WAIT(cb, table)``: execute signalling a fresh semaphore to 1 and wait for it."""
    done = device.create_semaphore(0)
    device.queue_execute([], [(done, 1)], command_buffer, binding_table)
    done.wait(1, WAIT)
    assert done.query() == 1


def empty_command_buffer(device):
    """``EMPTY_CB``: ONE_SHOT, DISPATCH, capacity 0, begun and ended."""
    cb = device.create_command_buffer(hal.CommandBufferMode.ONE_SHOT, hal.CommandCategory.DISPATCH, 0)
    cb.begin()
    cb.end()
    return cb


class Recording:
    """Buffer references in the current recording mode (IREE ``recording_mode()``).

    direct: ``ref(slot, buf, off, len)`` is ``BufferRef(buf, off, len)`` and the command buffer has no
    binding capacity; indirect: the ref names ``slot`` and ``buf`` goes into the binding table at that slot
    (whole buffer unless ``binding`` is given), and the command buffer has ``slots`` capacity.
    """

    def __init__(self, mode: str, slots: int):
        assert mode in RECORDING_MODES
        self.indirect = mode == "indirect"
        self.slots = slots
        self._table = [None] * slots

    @property
    def capacity(self) -> int:
        return self.slots if self.indirect else 0

    @property
    def table(self):
        return list(self._table) if self.indirect else None

    def bind(self, slot: int, binding) -> None:
        if self.indirect:
            self._table[slot] = binding

    def ref(self, slot: int, buffer, offset: int = 0, length: int = WHOLE) -> hal.BufferRef:
        if not self.indirect:
            return hal.BufferRef(buffer, offset, length)
        if self._table[slot] is None:
            self._table[slot] = hal.BufferRef(buffer, 0, WHOLE)
        else:
            bound = self._table[slot]
            assert (bound.buffer if isinstance(bound, hal.BufferRef) else bound) is buffer, \
                f"slot {slot} already bound to another buffer"
        return hal.BufferRef(slot=slot, offset=offset, length=length)

    def create(self, device, mode=hal.CommandBufferMode.ONE_SHOT, categories=hal.CommandCategory.ANY):
        return device.create_command_buffer(mode, categories, self.capacity)

    def submit_and_wait(self, device, command_buffer) -> None:
        submit_and_wait(device, command_buffer, self.table)
