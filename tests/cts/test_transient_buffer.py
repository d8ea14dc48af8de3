"""TransientBufferTest and AsyncTransientBufferTest: command buffers over queue_alloca'd buffers (IREE CTS
[H] command_buffer/transient_buffer_test.cc, C.3.14). A transient is ``queue_alloca`` with type
OPTIMAL_FOR_DEVICE, usage TRANSFER|DISPATCH_STORAGE; AsyncTransientBufferTest needs ``async_queue``."""

import pytest

from reference import hal
from .conftest import (
    BU, MA, MT, WAIT, WHOLE, filled, lsig, lwait, read_bytes, sl, submit_and_wait, u32s, zeroed,
)

TRANSFER = hal.CommandCategory.TRANSFER
ONE_SHOT = hal.CommandBufferMode.ONE_SHOT


def allocate_transient(device, size, access=MA.ALL):
    """``AllocateTransient``: alloca with no waits, then wait for its signal."""
    ready = device.create_semaphore(0)
    buf = device.queue_alloca([], [(ready, 1)], size, MT.OPTIMAL_FOR_DEVICE, BU.TRANSFER | BU.DISPATCH_STORAGE,
                              access)
    ready.wait(1, WAIT)
    assert buf.byte_length >= size
    return buf


def deallocate_transient(device, buf):
    """``DeallocateTransient``: queue_dealloca, then wait for its signal."""
    done = device.create_semaphore(0)
    device.queue_dealloca([], [(done, 1)], buf)
    done.wait(1, WAIT)


def run(device, record, categories=TRANSFER, capacity=0, table=None):
    cb = device.create_command_buffer(ONE_SHOT, categories, capacity)
    cb.begin()
    record(cb)
    cb.end()
    submit_and_wait(device, cb, table)


@pytest.mark.iree("TransientBufferTest.FillTransientBuffer")
def test_fill_transient_buffer(device):
    t = allocate_transient(device, 1024)
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 0, 1024), 0xDEADCAFE, 4))
    assert read_bytes(device, t, 0, 1024) == u32s(0xDEADCAFE) * 256
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.FillTransientBufferSubrange")
def test_fill_transient_buffer_subrange(device):
    t = allocate_transient(device, 256)
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 0, 256), 0, 1))
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 64, 128), 0xCAFEF00D, 4))
    got = read_bytes(device, t, 0, 256)
    assert got[64:192] == u32s(0xCAFEF00D) * 32
    assert got[:64] == bytes(64)
    assert got[192:] == bytes(64)
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.FillTransientBuffer1Byte")
def test_fill_transient_buffer_1byte(device):
    t = allocate_transient(device, 512)
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 0, 512), 0xAB, 1))
    assert read_bytes(device, t, 0, 512) == b"\xab" * 512
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.CopyToTransientBuffer")
def test_copy_to_transient_buffer(device):
    source = filled(device, 512, 0xAAAAAAAA)
    t = allocate_transient(device, 512)
    run(device, lambda cb: cb.copy_buffer(hal.BufferRef(source, 0, 512), hal.BufferRef(t, 0, 512)))
    assert read_bytes(device, t, 0, 512) == u32s(0xAAAAAAAA) * 128
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.CopyFromTransientBuffer")
def test_copy_from_transient_buffer(device):
    t = allocate_transient(device, 512)
    target = zeroed(device, 512)
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 0, 512), 0xBBBBBBBB, 4))
    run(device, lambda cb: cb.copy_buffer(hal.BufferRef(t, 0, 512), hal.BufferRef(target, 0, 512)))
    assert read_bytes(device, target) == u32s(0xBBBBBBBB) * 128
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.FillThenCopyInSingleCommandBuffer")
def test_fill_then_copy_in_single_command_buffer(device):
    t = allocate_transient(device, 256)
    target = zeroed(device, 256)

    def record(cb):
        cb.fill_buffer(hal.BufferRef(t, 0, 256), 0x11223344, 4)
        cb.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.TRANSFER)
        cb.copy_buffer(hal.BufferRef(t, 0, 256), hal.BufferRef(target, 0, 256))

    run(device, record)
    assert read_bytes(device, target) == u32s(0x11223344) * 64
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.UpdateTransientBuffer")
def test_update_transient_buffer(device):
    count = 64
    data = u32s(*range(100, 100 + count))
    t = allocate_transient(device, 4 * count)
    run(device, lambda cb: cb.update_buffer(data, 0, hal.BufferRef(t, 0, len(data))))
    assert read_bytes(device, t, 0, len(data)) == data
    deallocate_transient(device, t)


@pytest.mark.iree("TransientBufferTest.FillTransientWithZeroAccessFlags")
def test_fill_transient_with_zero_access_flags(device):
    t = allocate_transient(device, 256, access=MA.NONE)  # canonicalized to MEMORY_ACCESS_ALL
    run(device, lambda cb: cb.fill_buffer(hal.BufferRef(t, 0, 256), 0x55AA55AA, 4))
    assert read_bytes(device, t, 0, 256) == u32s(0x55AA55AA) * 64
    deallocate_transient(device, t)


# -- AsyncTransientBufferTest (async_queue) -----------------------------------------------------------

@pytest.mark.requires("async_queue")
@pytest.mark.iree("AsyncTransientBufferTest.StaticRefRecordedBeforeAllocaCommitExecutes")
def test_static_ref_recorded_before_alloca_commit_executes(device):
    w, g, e = sl(device, [0], [1]), sl(device, [0], [1]), sl(device, [0], [1])
    t = device.queue_alloca(w, g, 256, MT.OPTIMAL_FOR_DEVICE, BU.TRANSFER | BU.DISPATCH_STORAGE)
    assert g[0][0].query() == 0  # parked behind W
    cb = device.create_command_buffer(ONE_SHOT, TRANSFER, 0)
    cb.begin()
    cb.fill_buffer(hal.BufferRef(t, 0, 256), 0xA55A1337, 4)  # direct ref to a not-yet-committed transient
    cb.end()
    device.queue_execute(g, e, cb)
    lsig(w)
    lwait(device, e)
    assert read_bytes(device, t, 0, 256) == u32s(0xA55A1337) * 64
    deallocate_transient(device, t)


@pytest.mark.requires("async_queue")
@pytest.mark.iree("AsyncTransientBufferTest.IndirectRefResolvedAfterAllocaCommit")
def test_indirect_ref_resolved_after_alloca_commit(device):
    w, g, e = sl(device, [0], [1]), sl(device, [0], [1]), sl(device, [0], [1])
    cb = device.create_command_buffer(ONE_SHOT, TRANSFER, 1)
    cb.begin()
    cb.fill_buffer(hal.BufferRef(slot=0, offset=0, length=256), 0x5AA5C0DE, 4)
    cb.end()
    t = device.queue_alloca(w, g, 256, MT.OPTIMAL_FOR_DEVICE, BU.TRANSFER | BU.DISPATCH_STORAGE)
    assert g[0][0].query() == 0
    device.queue_execute(g, e, cb, [hal.BufferRef(t, 0, WHOLE)])
    lsig(w)
    lwait(device, e)
    assert read_bytes(device, t, 0, 256) == u32s(0x5AA5C0DE) * 64
    deallocate_transient(device, t)
