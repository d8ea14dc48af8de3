"""The ``cuda`` backend. Every check runs twice:

* ``[fake]`` — against the RECORDING FAKE of the driver API (``fake_cuda.py``: not CUDA; host memory
  stands in for device memory and kernels run the NumPy reference). It exercises the adapter and the
  engine around it here, where there is no GPU: call order, kernel-ABI marshalling, host mirroring,
  event pooling and cleanup. The NVRTC compile test (``test_kernel_sources.py``) is separate.
* ``[gpu]`` — marked ``gpu``, on a real NVIDIA GPU: the same smoke checks of the CTS kind, against the
  real driver and the NVRTC-compiled ``builtin.cu``. Without a GPU and driver they skip, saying so.

The whole CTS port also runs against the fake (opt-in): see ``fake_cuda_plugin.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import hal
from real_backends.common.kernel_abi import symbol
from reference.kernels import LIBRARY

from .harness import WAIT, dispatch, expected, random_inputs

pytest.importorskip("cuda.bindings", reason="the 'cuda' extra (cuda-bindings) is not installed")

from .fake_cuda import FakeCuda, install  # noqa: E402


@pytest.fixture(params=["fake", pytest.param("gpu", marks=pytest.mark.gpu)])
def cuda(request):
    """(device factory, fake or None)."""
    if request.param == "fake":
        with install() as fake:
            devices = []

            def make(**options):
                devices.append(hal.create_device("cuda", **options))
                return devices[-1]
            yield make, fake
            for d in devices:
                d.close()
        return
    try:
        hal.create_device("cuda").close()
    except hal.HalError as e:
        if e.code != hal.StatusCode.UNAVAILABLE:
            raise
        pytest.skip(f"gpu test: no NVIDIA GPU with a working driver on this machine ({e.message})")
    devices = []

    def make(**options):
        devices.append(hal.create_device("cuda", **options))
        return devices[-1]
    yield make, None
    for d in devices:
        d.close()


@pytest.mark.parametrize("name", [k.name for k in LIBRARY])
def test_kernel_matches_numpy_reference(cuda, name):
    make, _ = cuda
    dev = make()
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    for trial in range(4):
        workgroups, constants, datas = random_inputs(name, rng)
        assert dispatch(dev, name, workgroups, constants, datas, offset=4 * trial) == \
            expected(name, workgroups, constants, datas), (name, trial)


def _sem_wait(sem, value):
    sem.wait(value, WAIT)


def test_transfer_commands(cuda):
    make, _ = cuda
    dev = make()
    a = dev.allocator.allocate_buffer(64)
    b = dev.allocator.allocate_buffer(64)
    a.map_zero(0, hal.WHOLE_BUFFER)
    b.map_fill(0, hal.WHOLE_BUFFER, 0x11, 1)
    cb = dev.create_command_buffer()
    cb.begin()
    cb.fill_buffer(hal.BufferRef(a, 0, 8), 0xAB, 1)
    cb.fill_buffer(hal.BufferRef(a, 8, 8), 0xAB23, 2)
    cb.fill_buffer(hal.BufferRef(a, 16, 8), 0x01020304, 4)
    cb.update_buffer(b"\x05\x06\x07", 0, hal.BufferRef(a, 25, 3))
    cb.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.TRANSFER)
    cb.copy_buffer(hal.BufferRef(a, 0, 32), hal.BufferRef(b, 32, 32))
    cb.end()
    done = dev.create_semaphore(0)
    dev.queue_execute([], [(done, 1)], cb)
    _sem_wait(done, 1)
    head = bytes([0xAB] * 8) + bytes.fromhex("23ab") * 4 + bytes.fromhex("04030201") * 2 + b"\0\x05\x06\x07"
    assert a.map_read() == head + bytes(36)
    assert b.map_read() == bytes([0x11] * 32) + head + bytes(4)


def test_device_to_device_chain_across_queues_and_host_round_trip(cuda):
    make, fake = cuda
    dev = make(queues=2)
    exe = dev.load_executable()
    src = dev.allocator.allocate_buffer(16)
    mid = dev.allocator.allocate_buffer(16)
    out = dev.allocator.allocate_buffer(16)
    src.map_write(0, np.array([1, -2, 3, -4], np.int32).tobytes())
    s1, s2, host = dev.create_semaphore(0), dev.create_semaphore(0), dev.create_semaphore(0)
    # queue 1 is submitted first and waits on queue 0's result (wait-before-signal), which waits on the host
    dev.queue_dispatch([(s1, 1)], [(s2, 1)], exe, exe.lookup_export("double_it"), (1, 1, 1),
                       bindings=(hal.BufferRef(mid, 0, 16), hal.BufferRef(out, 0, 16)), queue_affinity=1 << 1)
    dev.queue_dispatch([(host, 1)], [(s1, 1)], exe, exe.lookup_export("negate"), (1, 1, 1),
                       bindings=(hal.BufferRef(src, 0, 16), hal.BufferRef(mid, 0, 16)), queue_affinity=1 << 0)
    assert s2.query() == 0
    host.signal(1)
    _sem_wait(s2, 1)
    assert np.frombuffer(out.map_read(), np.int32).tolist() == [-2, 4, -6, 8]
    if fake is not None:
        # the consumer's stream waited on the very CUevent the producer's stream recorded for s1 >= 1
        # whether the consumer waits on the producer's CUevent or on the host-signalled value depends on
        # timing; when it waits on an event, that event was recorded before (the fake raises otherwise)
        for wait in (c for c in fake.calls if c[0] == "cuStreamWaitEvent"):
            before = fake.calls[:fake.calls.index(wait)]
            assert any(c[0] == "cuEventRecord" and c[1] == wait[2] for c in before)


def test_failed_wait_fails_the_op_and_is_sticky(cuda):
    make, _ = cuda
    dev = make()
    w, s = dev.create_semaphore(0), dev.create_semaphore(0)
    dev.queue_execute([(w, 1)], [(s, 1)])
    w.fail(hal.StatusCode.DATA_LOSS, "boom")
    with pytest.raises(hal.HalError):
        s.wait(1, WAIT)
    later = dev.create_semaphore(0)
    dev.queue_execute([], [(later, 1)])
    with pytest.raises(hal.HalError):
        later.wait(1, WAIT)


# -- the fake only: the calls themselves --------------------------------------------------------------

def _one_dispatch(dev):
    exe = dev.load_executable()
    a = dev.allocator.allocate_buffer(16)
    b = dev.allocator.allocate_buffer(32)
    a.map_write(0, np.arange(4, dtype=np.int32).tobytes())
    done = dev.create_semaphore(0)
    dev.queue_dispatch([], [(done, 1)], exe, exe.lookup_export("scale_and_offset"), (1, 1, 1),
                       constants=(3, 10), bindings=(hal.BufferRef(a, 0, 16), hal.BufferRef(b, 16, 16)))
    done.wait(1, WAIT)
    return a, b


def test_fake_submission_call_order():
    with install() as fake:
        with hal.create_device("cuda") as dev:
            start = len(fake.calls)
            a, b = _one_dispatch(dev)
            assert np.frombuffer(b.map_read(16, 16), np.int32).tolist() == [10, 13, 16, 19]
            seq = [c[0] for c in fake.calls[start:] if c[0] in (
                "cuStreamSynchronize", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuMemcpyDtoHAsync",
                "cuEventRecord", "cuEventSynchronize")]
            # sync the stream, upload both bindings, (anchor record + sync), launch + timing record,
            # write back the written binding, sync, then the signal event record and its synchronize
            assert seq == ["cuStreamSynchronize", "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync", "cuEventRecord",
                           "cuStreamSynchronize", "cuLaunchKernel", "cuEventRecord", "cuMemcpyDtoHAsync",
                           "cuStreamSynchronize", "cuEventRecord", "cuEventSynchronize"], seq
            launch = next(c for c in fake.calls if c[0] == "cuLaunchKernel")
            assert fake.functions[launch[1]] == "hal_scale_and_offset" and launch[11] == 0
            values = launch[10][0]
            assert values[1] == 0 and values[3] == 16 and values[4:] == (3, 10, 4)
            up = [c for c in fake.calls[start:] if c[0] == "cuMemcpyHtoDAsync"]
            assert sorted(c[3] for c in up) == [16, 16]


def test_fake_event_pool_capacity_and_cleanup():
    with install() as fake:
        dev = hal.create_device("cuda", event_pool_capacity=5)
        assert dev.engine.pool.capacity == 5
        assert sum(1 for c in fake.calls if c[0] == "cuEventCreate") == 5
        sems = [dev.create_semaphore(0) for _ in range(8)]
        gate = dev.create_semaphore(0)
        dev.queue_execute([(gate, 1)], [(sems[0], 1)])
        for i in range(1, 8):  # 8 signals in flight: 5 pooled events, 3 created beyond capacity
            dev.queue_execute([(sems[i - 1], 1)], [(sems[i], 1)])
        gate.signal(1)
        sems[-1].wait(1, WAIT)
        _one_dispatch(dev)
        dev.close()
        assert fake.events == {}, "every CUevent is destroyed by close()"
        assert fake.memory == {}, "all device memory is freed by close()"
        assert not fake.streams


def test_fake_device_memory_follows_buffer_lifetime():
    with install() as fake:
        with hal.create_device("cuda") as dev:
            a, b = _one_dispatch(dev)
            assert len(fake.memory) == 2
            del a, b
            import gc
            gc.collect()
            for _ in range(4):  # the worker frees dead buffers' memory before later submits
                _one_dispatch(dev)
                gc.collect()
            assert len(fake.memory) <= 4, "device memory of dead buffers is freed, not accumulated"
            frees = [c for c in fake.calls if c[0] == "cuMemFree"]
            assert len(frees) >= 4


def test_fake_module_is_a_cubin_for_the_device_architecture():
    """A CUBIN where NVRTC builds machine code the device runs (same major version, minor not above):
    a CUDA 13.0 driver (the default fake's) loads it although it cannot JIT NVRTC 13.5's PTX."""
    for cc, arch in (((9, 0), 90), ((8, 6), 86), ((9, 9), 90), ((7, 5), 75)):
        with install(FakeCuda(compute_capability=cc)) as fake:
            with hal.create_device("cuda") as dev:
                assert (dev.adapter.image_kind, dev.adapter.arch) == ("cubin", arch), cc
                assert (fake.module_kind, fake.module_arch) == ("cubin", arch), cc
                assert fake.module_entries == {symbol(k.name) for k in LIBRARY}


def test_fake_newer_device_gets_ptx_which_an_older_driver_cannot_jit():
    """A device newer than NVRTC knows gets PTX for NVRTC's newest architecture; a driver older than
    NVRTC refuses it (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): UNAVAILABLE naming both releases and the
    fix, and the primary context retained for the device is released again."""
    from real_backends.cuda.nvrtc import nvrtc_version, supported_archs

    major, minor = nvrtc_version()
    with install(FakeCuda(compute_capability=(99, 0), driver_version=major * 1000 + minor * 10)) as fake:
        with hal.create_device("cuda") as dev:  # a driver as new as NVRTC JITs its PTX
            assert (dev.adapter.image_kind, dev.adapter.arch) == ("ptx", max(supported_archs()))
            assert fake.module_kind == "ptx"
    if (major, minor) <= (13, 0):
        pytest.skip(f"NVRTC {major}.{minor} is not newer than the fake's CUDA 13.0 driver")
    with install(FakeCuda(compute_capability=(99, 0))) as fake:
        with pytest.raises(hal.HalError) as e:
            hal.create_device("cuda")
        assert e.value.code == hal.StatusCode.UNAVAILABLE
        assert e.value.message == (
            f"cuda: the NVIDIA driver (CUDA 13.0) cannot JIT the PTX of NVRTC {major}.{minor} for compute "
            "capability 99.0 (NVRTC builds no machine code for it): install the nvidia-cuda-nvrtc of the "
            "driver's release (pip install 'nvidia-cuda-nvrtc==13.0.*') or a newer driver")
        names = fake.names()
        assert names.count("cuDevicePrimaryCtxRetain") == names.count("cuDevicePrimaryCtxRelease") == 1


def test_fake_checks_arguments_against_the_real_cuda_bindings():
    """Without a loadable driver, each fake call first makes the real cuda-bindings call with the same
    arguments, whose conversion refuses what the real API would (the driver load then fails)."""
    import ctypes

    from . import fake_cuda

    if not fake_cuda._no_driver():
        pytest.skip("an NVIDIA driver is loadable here: the real calls are not made (the gpu tests run)")
    fake = FakeCuda()
    stream = fake.CUstream(1)
    with pytest.raises(fake_cuda.FakeDriverError, match="cuda-bindings refuses the arguments"):
        fake.cuLaunchKernel(fake.CUfunction(1), 1, 1, 1, 256, 1, 1, 0, stream,
                            ((1, 2, 3), (ctypes.c_void_p, ctypes.c_uint32)), 0)  # 3 values, 2 types
    with pytest.raises(fake_cuda.FakeDriverError, match="cuMemsetD8Async"):
        fake.cuMemsetD8Async(0x1000, 7, 4, "stream 1")
    fake_cuda.marshals("cuMemsetD8Async", (0x1000, 7, 4, stream))  # well-typed: passes


# -- graphs: reusable command buffers -----------------------------------------------------------------

def _pipeline_cb(dev, exe, a, b, mode=hal.CommandBufferMode.DEFAULT):
    cb = dev.create_command_buffer(mode)
    cb.begin()
    cb.update_buffer(np.array([7], np.int32).tobytes(), 0, hal.BufferRef(a, 12, 4))
    cb.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.DISPATCH)
    cb.dispatch(exe, exe.lookup_export("scale_and_offset"), (1, 1, 1), (2, 1),
                (hal.BufferRef(a, 0, 16), hal.BufferRef(b, 0, 16)))
    cb.fill_buffer(hal.BufferRef(b, 16, 16), 0x0102, 2)
    cb.end()
    return cb


def _run(dev, cb):
    done = dev.create_semaphore(0)
    dev.queue_execute([], [(done, 1)], cb)
    done.wait(1, WAIT)


def test_reusable_command_buffer_runs_again_with_new_host_data(cuda):
    make, fake = cuda
    dev = make()
    exe = dev.load_executable()
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(32)
    cb = _pipeline_cb(dev, exe, a, b)
    for round_ in range(3):
        a.map_write(0, np.array([round_, 1, 2, 3], np.int32).tobytes())
        _run(dev, cb)
        assert np.frombuffer(b.map_read(0, 16), np.int32).tolist() == [2 * round_ + 1, 3, 5, 15]
        assert b.map_read(16, 16) == bytes.fromhex("0201") * 8
    if fake is not None:  # captured once, launched three times
        names = fake.names()
        assert names.count("cuStreamBeginCapture") == 1 and names.count("cuGraphLaunch") == 3
        assert names.count("cuGraphInstantiate") == 1


def test_fake_one_shot_and_disabled_graphs_replay_on_the_stream():
    for mode, options in ((hal.CommandBufferMode.ONE_SHOT, {}), (hal.CommandBufferMode.DEFAULT, {"graphs": False})):
        with install() as fake:
            with hal.create_device("cuda", **options) as dev:
                exe = dev.load_executable()
                a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(32)
                a.map_write(0, np.arange(4, dtype=np.int32).tobytes())
                _run(dev, _pipeline_cb(dev, exe, a, b, mode))
                assert np.frombuffer(b.map_read(0, 16), np.int32).tolist() == [1, 3, 5, 15]
                assert "cuStreamBeginCapture" not in fake.names()


def test_fake_graphs_follow_their_command_buffer():
    import gc

    with install() as fake:
        with hal.create_device("cuda") as dev:
            exe = dev.load_executable()
            a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(32)
            cb = _pipeline_cb(dev, exe, a, b)
            _run(dev, cb)
            c = dev.allocator.allocate_buffer(16)
            cb2 = dev.create_command_buffer(hal.CommandBufferMode.DEFAULT)  # reusable (ONE_SHOT is the default)
            cb2.begin()
            cb2.copy_buffer(hal.BufferRef(a, 0, 16), hal.BufferRef(c, 0, 16))
            cb2.end()
            _run(dev, cb2)
            assert len(fake.execs) == 2
            del cb
            gc.collect()
            _run(dev, cb2)   # the worker destroys the dead command buffer's graph before this submit
            assert len(fake.execs) == 1 and len(fake.graphs) == 1
        assert not fake.execs and not fake.graphs and not fake.memory


# -- copies between binding-table slots aliasing overlapping ranges of one buffer (memmove) ------------

def _aliased_copy_cb(dev, mode):
    cb = dev.create_command_buffer(mode, binding_capacity=2)
    cb.begin()
    cb.copy_buffer(hal.BufferRef(slot=0, offset=0, length=8), hal.BufferRef(slot=1, offset=0, length=8))
    cb.end()
    return cb


@pytest.mark.parametrize("mode", [hal.CommandBufferMode.ONE_SHOT, hal.CommandBufferMode.DEFAULT],
                         ids=["stream", "graph"])
@pytest.mark.parametrize("source, target", [(0, 4), (4, 0)], ids=["forward", "backward"])
def test_copy_between_aliased_overlapping_slots_is_staged(cuda, mode, source, target):
    """Source → scratch → target (two cuMemcpyDtoDAsync, never one between overlapping ranges, which
    CUDA leaves undefined and the fake refuses); a reusable command buffer's graph owns the scratch and
    runs again with the buffer's new contents; the stream path frees its scratch after the op."""
    make, fake = cuda
    dev = make()
    b = dev.allocator.allocate_buffer(16)
    cb = _aliased_copy_cb(dev, mode)
    table = [hal.BufferRef(b, source, 12), hal.BufferRef(b, target, 12)]
    runs = 1 if mode & hal.CommandBufferMode.ONE_SHOT else 3
    for round_ in range(runs):
        data = bytes((x + 16 * round_) % 256 for x in range(16))
        b.map_write(0, data)
        start = len(fake.calls) if fake is not None else 0
        done = dev.create_semaphore(0)
        dev.queue_execute([], [(done, 1)], cb, table)
        done.wait(1, WAIT)
        expect = bytearray(data)
        expect[target:target + 8] = data[source:source + 8]
        assert b.map_read() == bytes(expect), round_
        if fake is None:
            continue
        calls = fake.calls[start:]
        names = [c[0] for c in calls]
        if runs == 1:
            copies = [c for c in calls if c[0] == "cuMemcpyDtoDAsync"]
            assert len(copies) == 2
            (_, temp, a, n1, _), (_, b_ptr, temp2, n2, _) = copies
            assert temp == temp2 and n1 == n2 == 8 and b_ptr - a == target - source
            # one command: both copies between the anchor's record and the command's timing record
            i, j = names.index("cuMemcpyDtoDAsync"), len(names) - 1 - names[::-1].index("cuMemcpyDtoDAsync")
            assert names[i - 3:i] == ["cuEventRecord", "cuStreamSynchronize", "cuMemAlloc"], names
            assert names[j + 1:j + 3] == ["cuEventCreate", "cuEventRecord"] and calls[i - 1][1] == 8
            free = next(k for k, c in enumerate(calls) if c[0] == "cuMemFree" and c[1] == temp)
            assert "cuStreamSynchronize" in names[j:free], "the scratch is freed after the stream is synchronized"
        elif round_ == 0:
            assert names.count("cuStreamBeginCapture") == 1 and names.count("cuGraphLaunch") == 1
        else:
            assert "cuStreamBeginCapture" not in names and "cuMemAlloc" not in names and "cuMemFree" not in names
    if fake is not None:
        dev_memory = {int(p) for _, p in dev.adapter._memory.values()}
        graph_memory = {int(p) for g in dev.adapter._graphs.values() for p in g.staged}
        assert set(fake.memory) == dev_memory | graph_memory  # no scratch left but the graph's
        assert len(graph_memory) == (runs > 1)
        t = dev.create_semaphore(0)
        dev.queue_fill([], [(t, 1)], b, 0, 4, 1, 1)  # the queue still works
        t.wait(1, WAIT)
        assert b.map_read(0, 4) == b"\x01" * 4


def test_fake_refuses_an_overlapping_device_copy():
    """CUDA's copies are not memmove: the fake refuses overlapping ranges rather than hide a missing
    staging copy behind ctypes.memmove."""
    from . import fake_cuda

    fake = FakeCuda()
    ptr = int(fake.cuMemAlloc(16)[1])
    fake.cuMemcpyDtoDAsync(ptr + 8, ptr, 8, fake.CUstream(1))  # adjacent: fine
    with pytest.raises(fake_cuda.FakeDriverError, match="overlapping"):
        fake.cuMemcpyDtoDAsync(ptr + 4, ptr, 8, fake.CUstream(1))


@pytest.mark.parametrize("mode", [hal.CommandBufferMode.ONE_SHOT, hal.CommandBufferMode.DEFAULT],
                         ids=["stream", "graph"])
@pytest.mark.parametrize("start, pattern_length, length", [(1, 4, 12), (2, 4, 8), (3, 2, 10), (1, 4, 2 * 4)])
def test_fill_of_a_range_off_the_pattern_alignment(cuda, mode, start, pattern_length, length):
    """cuMemsetD16/D32Async need an aligned pointer (the fake refuses others, as the driver's
    documentation says); a subspan at an odd byte takes a HAL-valid fill at its offset 0: the
    adapter writes the unaligned bytes with cuMemsetD8Async around an aligned rotated fill."""
    make, _ = cuda
    dev = make()
    root = dev.allocator.allocate_buffer(64)
    root.map_fill(0, hal.WHOLE_BUFFER, 0xEE, 1)
    pattern = 0x44332211 & ((1 << (8 * pattern_length)) - 1)
    cb = dev.create_command_buffer(mode)
    cb.begin()
    cb.fill_buffer(hal.BufferRef(root.subspan(start, 40), 0, length), pattern, pattern_length)
    cb.end()
    sem = dev.create_semaphore()
    dev.queue_execute([], [(sem, 1)], cb)
    _sem_wait(sem, 1)
    filled = pattern.to_bytes(pattern_length, "little") * (length // pattern_length)
    assert root.map_read() == b"\xee" * start + filled + b"\xee" * (64 - start - length)
