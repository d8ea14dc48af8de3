"""The ``cuda`` adapter against the rules of the CUDA driver API that the recording fake enforces since
pass 5 (``fake_cuda.py``: current contexts per thread and per-device primary contexts, handles of one
context, the legacy stream's pageable ``cuMemcpyHtoD`` DMA), and its error and cleanup paths.
Fake only: each test says which documented rule or leak it checks."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from reference import hal
from tests.conftest import join

from .harness import WAIT

pytest.importorskip("cuda.bindings", reason="the 'cuda' extra (cuda-bindings) is not installed")

from . import fake_cuda  # noqa: E402
from .fake_cuda import FakeCuda, FakeDriverError, _real, install  # noqa: E402


def _failing(fake, name: str, nth: int, result=None):
    """Make the ``nth`` call of ``fake.<name>`` return an error ``CUresult`` (as the real call would)."""
    orig, count = getattr(fake, name), [0]
    result = result if result is not None else _real.CUresult.CUDA_ERROR_LAUNCH_FAILED

    def call(*args):
        count[0] += 1
        if count[0] == nth:
            fake.log(name, *args)
            return (result, None)
        return orig(*args)
    setattr(fake, name, call)


def _leftovers(fake) -> dict:
    return {k: v for k, v in (("events", len(fake.events)), ("allocations", len(fake.memory)),
                              ("graphs", len(fake.graphs)), ("graph execs", len(fake.execs)),
                              ("streams", len(fake.streams))) if v}


# -- the stricter fake itself -------------------------------------------------------------------------

def test_fake_context_rules():
    """A thread starts with no current context; context-bound calls (those whose docs list
    CUDA_ERROR_INVALID_CONTEXT) need one; cuModuleUnload unloads "from the current context";
    cuEventRecord's event and stream "must be from the same context"; a released primary context is reset."""
    fake = FakeCuda(device_count=2)
    assert {"cuEventCreate", "cuMemAlloc", "cuStreamSynchronize", "cuModuleUnload"} <= fake_cuda.CONTEXT_BOUND
    c0 = fake.cuDevicePrimaryCtxRetain(fake.CUdevice(0))[1]
    c1 = fake.cuDevicePrimaryCtxRetain(fake.CUdevice(1))[1]
    assert int(fake.cuDevicePrimaryCtxRetain(fake.CUdevice(0))[1]) == int(c0)  # one primary context per device
    with pytest.raises(FakeDriverError, match="no current context"):
        fake.cuEventCreate(0)
    fake.cuCtxSetCurrent(c0)
    e0 = fake.cuEventCreate(0)[1]
    fake.cuCtxSetCurrent(c1)
    s1 = fake.cuStreamCreate(int(_real.CUstream_flags.CU_STREAM_NON_BLOCKING))[1]
    with pytest.raises(FakeDriverError, match="different contexts"):
        fake.cuEventRecord(e0, s1)
    errors = []
    thread = threading.Thread(target=lambda: errors.extend(_call(fake.cuMemAlloc, 16)))
    thread.start()
    join(thread)
    assert errors and "no current context" in errors[0]  # the context is current per thread
    fake.cuDevicePrimaryCtxRelease(fake.CUdevice(1))
    with pytest.raises(FakeDriverError, match="was reset"):
        fake.cuStreamSynchronize(s1)


def _call(fn, *args) -> list[str]:
    try:
        fn(*args)
    except FakeDriverError as e:
        return [str(e)]
    return []


def test_fake_legacy_stream_dma_is_unordered_with_non_blocking_streams():
    """A synchronous cuMemcpyHtoD from pageable memory may return before "the DMA to final destination"
    completed; a non-blocking stream does not synchronize with stream 0: the fake refuses a stream
    operation on the range until a legacy-stream synchronization (here cuCtxSynchronize)."""
    fake = FakeCuda()
    fake.cuCtxSetCurrent(fake.cuDevicePrimaryCtxRetain(fake.CUdevice(0))[1])
    s = fake.cuStreamCreate(int(_real.CUstream_flags.CU_STREAM_NON_BLOCKING))[1]
    a, b = int(fake.cuMemAlloc(8)[1]), int(fake.cuMemAlloc(8)[1])
    data = b"\x01\x02\x03\x04\x05\x06\x07\x08"
    fake.cuMemcpyHtoD(a, data, 8)
    with pytest.raises(FakeDriverError, match="may not have completed"):
        fake.cuMemcpyDtoDAsync(b, a, 8, s)
    fake.cuCtxSynchronize()
    fake.cuMemcpyDtoDAsync(b, a, 8, s)
    assert bytes(fake.memory[b]) == data


# -- bug01: the context of the calling thread with two devices ------------------------------------------

def test_two_devices_on_one_thread_each_call_in_its_own_context():
    """Closing (or otherwise calling into) ordinal 0 after ordinal 1 was created on the same thread must
    make ordinal 0's primary context current again: cuModuleUnload "unloads a module from the current
    context" (before: the adapter bound a thread once per adapter, so ordinal 1's context stayed)."""
    with install(FakeCuda(device_count=2)) as fake:
        d0 = hal.create_device("cuda", ordinal=0)
        d1 = hal.create_device("cuda", ordinal=1)
        for dev in (d0, d1):  # work on both, from the same host thread
            buf = dev.allocator.allocate_buffer(16)
            sem = dev.create_semaphore(0)
            dev.queue_fill([], [(sem, 1)], buf, 0, 16, 7, 1)
            sem.wait(1, WAIT)
            assert buf.map_read() == b"\x07" * 16
        d0.close()
        d1.close()
        unloads = [c for c in fake.calls if c[0] == "cuModuleUnload"]
        assert len(unloads) == 2
        assert fake.contexts[fake.primary[0]]["refs"] == fake.contexts[fake.primary[1]]["refs"] == 0


def test_close_sets_the_context_even_if_user_code_changed_it():
    """User code may make another context current on the host thread (its own, another library's):
    close() makes the device's own current before its context-bound calls."""
    with install(FakeCuda(device_count=2)) as fake:
        dev = hal.create_device("cuda", ordinal=0)
        other = fake.cuDevicePrimaryCtxRetain(fake.CUdevice(1))[1]
        fake.cuCtxSetCurrent(other)  # as a user's cuCtxSetCurrent would
        dev.close()
        assert fake.contexts[fake.primary[0]]["refs"] == 0


# -- bug02: dealloca frees the transient's device memory ------------------------------------------------

@pytest.mark.parametrize("through", ["buffer", "subspan"])
def test_dealloca_frees_device_memory_while_the_handle_lives(through):
    """IREE frees a transient at dealloca; the adapter's memory for a decommitted allocation goes
    (Adapter.forget), not only once the Python handle is garbage — also when the work used it through
    a subspan (the memory is the allocation's, not the view's)."""
    mb = 1 << 20
    with install() as fake:
        with hal.create_device("cuda") as dev:
            s, v, kept = dev.create_semaphore(0), 0, []
            for _ in range(3):
                buf = dev.queue_alloca([(s, v)], [(s, v + 1)], mb)
                target = buf if through == "buffer" else buf.subspan(0, mb)
                dev.queue_fill([(s, v + 1)], [(s, v + 2)], target, 0, mb, 7, 1)
                kept.append(target)
                dev.queue_dealloca([(s, v + 2)], [(s, v + 3)], buf)
                v += 3
                s.wait(v, WAIT)
            other, t = dev.allocator.allocate_buffer(16), dev.create_semaphore(0)
            dev.queue_fill([], [(t, 1)], other, 0, 16, 1, 1)  # the worker frees before this submit
            t.wait(1, WAIT)
            assert sorted(len(b) for b in fake.memory.values()) == [16]
            dev.queue_fill([], [(t, 2)], kept[0], 0, 16, 1, 1)  # (the decommitted buffer is still refused)
            with pytest.raises(hal.HalError) as e:
                t.wait(2, WAIT)
            assert (e.value.code, e.value.message) == (
                hal.StatusCode.FAILED_PRECONDITION, "command operand b0 used after queue_dealloca released it")


def test_forget_leaves_no_stale_key_for_a_reused_storage_id():
    """forget drops the keys from the root's list too: a later storage reusing a dropped storage's id
    (another buffer's) must not be freed when the deallocated buffer's handle dies."""
    with install() as fake:
        with hal.create_device("cuda") as dev:
            s = dev.create_semaphore(0)
            buf = dev.queue_alloca([], [(s, 1)], 64)
            dev.queue_fill([(s, 1)], [(s, 2)], buf, 0, 64, 3, 1)
            dev.queue_dealloca([(s, 2)], [(s, 3)], buf)
            s.wait(3, WAIT)
            adapter = dev.adapter
            assert adapter._owned.get(id(buf.root)) == []
            del buf
            gc.collect()
            live = dev.allocator.allocate_buffer(64)
            dev.queue_fill([(s, 3)], [(s, 4)], live, 0, 64, 5, 1)
            s.wait(4, WAIT)
            assert live.map_read() == b"\x05" * 64
            assert len(fake.memory) == 1


# -- bug03: graph staging is stream-ordered -------------------------------------------------------------

def test_graph_update_bytes_are_staged_on_the_dispatch_stream():
    """A reusable command buffer's update bytes are copied into the graph's device memory on the
    dispatch stream before the capture (cuMemcpyHtoDAsync), not with a synchronous cuMemcpyHtoD on the
    legacy stream, whose DMA a non-blocking stream's graph launch is not ordered after."""
    with install() as fake:
        with hal.create_device("cuda") as dev:
            a = dev.allocator.allocate_buffer(16)
            cb = dev.create_command_buffer(hal.CommandBufferMode.DEFAULT)
            cb.begin()
            cb.update_buffer(np.array([7, 8], np.int32).tobytes(), 0, hal.BufferRef(a, 4, 8))
            cb.end()
            for i in range(2):
                a.map_zero(0, hal.WHOLE_BUFFER)
                done = dev.create_semaphore(0)
                dev.queue_execute([], [(done, 1)], cb)
                done.wait(1, WAIT)
                assert np.frombuffer(a.map_read(), np.int32).tolist() == [0, 7, 8, 0]
            names = fake.names()
            assert "cuMemcpyHtoD" not in names
            assert names.count("cuStreamBeginCapture") == 1 and names.count("cuGraphLaunch") == 2
            begin = names.index("cuStreamBeginCapture")
            staged = [c for c in fake.calls[:begin] if c[0] == "cuMemcpyHtoDAsync" and c[3] == 8]
            assert staged and staged[-1][4] == int(dev.adapter.streams[0])


# -- bug04: a failed device creation releases what it made ----------------------------------------------

def test_failed_stream_creation_releases_the_context_module_and_streams():
    fake = FakeCuda()
    _failing(fake, "cuStreamCreate", 2, _real.CUresult.CUDA_ERROR_OUT_OF_MEMORY)
    with install(fake):
        with pytest.raises(hal.HalError) as e:
            hal.create_device("cuda", queues=2)
        assert e.value.code == hal.StatusCode.RESOURCE_EXHAUSTED
        assert e.value.message == "cuda: cuStreamCreate failed (CUDA_ERROR_OUT_OF_MEMORY)"
        names = fake.names()
        assert names.count("cuDevicePrimaryCtxRetain") == names.count("cuDevicePrimaryCtxRelease") == 1
        assert names.count("cuModuleUnload") == 1 and names.count("cuStreamDestroy") == 1
        assert not fake.streams


# -- bug05: the graphs of a command buffer are bounded ---------------------------------------------------

def test_graphs_per_command_buffer_are_bounded():
    """One graph per resolved binding table, least recently used out: a reusable command buffer run with
    fresh buffers each time keeps at most GRAPHS_PER_COMMAND_BUFFER graphs (and their staged memory)."""
    from real_backends.cuda.graphs import GRAPHS_PER_COMMAND_BUFFER

    with install() as fake:
        with hal.create_device("cuda") as dev:
            cb = dev.create_command_buffer(hal.CommandBufferMode.DEFAULT, binding_capacity=1)
            cb.begin()
            cb.update_buffer(np.arange(4, dtype=np.int32).tobytes(), 0, hal.BufferRef(slot=0, offset=0, length=16))
            cb.end()
            sem, results = dev.create_semaphore(0), []
            for i in range(12):
                buf = dev.allocator.allocate_buffer(16)
                dev.queue_execute([(sem, i)], [(sem, i + 1)], cb, binding_table=[hal.BufferRef(buf, 0, 16)])
                sem.wait(i + 1, WAIT)
                assert np.frombuffer(buf.map_read(), np.int32).tolist() == [0, 1, 2, 3]
                results.append(buf)
            assert len(fake.execs) == len(fake.graphs) == GRAPHS_PER_COMMAND_BUFFER == 4
            assert len(fake.memory) == 12 + 4  # the results and the graphs' staged update bytes
            # the most recently used graph is kept: running the last table again captures nothing new
            captures = fake.names().count("cuStreamBeginCapture")
            dev.queue_execute([(sem, 12)], [(sem, 13)], cb, binding_table=[hal.BufferRef(results[-1], 0, 16)])
            sem.wait(13, WAIT)
            assert fake.names().count("cuStreamBeginCapture") == captures


# -- bug06: failed CUDA calls leak nothing past close() --------------------------------------------------

def _graph_cb(dev):
    exe = dev.load_executable()
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    cb = dev.create_command_buffer(hal.CommandBufferMode.DEFAULT)
    cb.begin()
    cb.update_buffer(b"\1\2\3\4", 0, hal.BufferRef(a, 0, 4))
    cb.dispatch(exe, exe.lookup_export("negate"), (1, 1, 1), (), (hal.BufferRef(a, 0, 16), hal.BufferRef(b, 0, 16)))
    cb.end()
    return cb


@pytest.mark.parametrize("name, nth", [("cuEventRecord", 1), ("cuStreamSynchronize", 2), ("cuLaunchKernel", 1),
                                       ("cuGraphInstantiate", 1), ("cuStreamBeginCapture", 1),
                                       ("cuMemcpyDtoDAsync", 1)])
def test_a_failed_call_in_submit_fails_the_op_and_leaks_nothing(name, nth):
    fake = FakeCuda()
    with install(fake):
        dev = hal.create_device("cuda")
        _failing(fake, name, nth)
        cb = _graph_cb(dev)
        s = dev.create_semaphore(0)
        dev.queue_execute([], [(s, 1)], cb)
        with pytest.raises(hal.HalError) as e:
            s.wait(1, WAIT)
        assert e.value.code == hal.StatusCode.INTERNAL
        assert e.value.message == f"cuda: {name} failed (CUDA_ERROR_LAUNCH_FAILED)"
        dev.close()
        assert _leftovers(fake) == {}


def test_a_failed_one_shot_completion_record_leaks_no_event():
    fake = FakeCuda()
    with install(fake):
        dev = hal.create_device("cuda")
        _failing(fake, "cuEventRecord", 1)
        dev.queue_barrier([], [])  # signals nothing: a one-shot completion event, whose record fails
        engine = dev.engine
        with engine._idle:
            assert engine._idle.wait_for(lambda: not engine._inflight, WAIT)
        assert engine._status.code == hal.StatusCode.INTERNAL
        assert engine._status.message == "cuda: cuEventRecord failed (CUDA_ERROR_LAUNCH_FAILED)"
        dev.close()
        assert _leftovers(fake) == {}


# -- bug08: the URI's path is the device ordinal ----------------------------------------------------------

def test_the_uri_path_is_the_device_ordinal():
    """IREE's create_device_by_path takes an integer path as the device index: ``cuda:1`` is ordinal 1
    (before: the path was ignored and ordinal 0 made, named cuda:1); every GPU is listed."""
    from real_backends.cuda import driver

    with install(FakeCuda(device_count=2)):
        # named by the ordinal, as query_available_devices names it, however the URI spells it
        for uri, ordinal, name in (("cuda:1", 1, "cuda:1"), ("cuda://1", 1, "cuda:1"), ("cuda:01", 1, "cuda:1"),
                                   ("cuda?ordinal=1", 1, "cuda:1"), ("cuda:1?ordinal=1", 1, "cuda:1"),
                                   ("cuda", 0, "cuda"), ("cuda://", 0, "cuda"), ("cuda:0", 0, "cuda")):
            with hal.create_device(uri) as dev:
                assert (int(dev.adapter.cu_device), dev.uri, dev.trace.header["device"]) == (ordinal, name, name)
        with pytest.raises(hal.HalError) as e:
            hal.create_device("cuda://2")
        assert (e.value.code, e.value.message) == (hal.StatusCode.NOT_FOUND,
                                                   "cuda: no device 2 (the driver has 2: ordinals 0 to 1)")
        with pytest.raises(hal.HalError) as e:
            hal.create_device("cuda:1?ordinal=2")
        assert e.value.code == hal.StatusCode.INVALID_ARGUMENT
        assert e.value.message == "cuda:1: option ordinal=2 names another device"
        with pytest.raises(hal.HalError) as e:
            hal.create_device("cuda:GPU1234")  # (GPU-<uuid> paths: test_cuda_uuid_paths.py)
        assert e.value.code == hal.StatusCode.NOT_FOUND
        assert e.value.message == ("cuda: unsupported device path 'GPU1234' (a device ordinal or UUID: cuda:1, "
                                   "cuda:GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L lists it)")
        assert [(d.uri, d.name) for d in driver.query_available_devices()] == [
            ("cuda", "cuda (Fake CUDA device (recording fake))"), ("cuda:1", "cuda (Fake CUDA device (recording fake))")]


# -- patches/01.diff (real_backends/common/engine.py): a signal event whose record failed --------------

@pytest.mark.parametrize("capacity", [32, 0])
def test_a_failed_signal_record_returns_its_pool_event(capacity):
    """The engine acquires a device-signal event from the pool, then the adapter's record fails: the
    event goes back to the pool (destroyed beyond its capacity), not lost — close() leaves no CUevent."""
    fake = FakeCuda()
    with install(fake):
        dev = hal.create_device("cuda", event_pool_capacity=capacity)
        _failing(fake, "cuEventRecord", 1)
        s = dev.create_semaphore(0)
        dev.queue_barrier([], [(s, 1)])  # its signal event's cuEventRecord fails
        with pytest.raises(hal.HalError) as e:
            s.wait(1, WAIT)
        assert e.value.code == hal.StatusCode.INTERNAL
        assert e.value.message == "cuda: cuEventRecord failed (CUDA_ERROR_LAUNCH_FAILED)"
        assert dev.engine.pool.in_use == 0
        dev.close()
        assert _leftovers(fake) == {}
