"""SemaphoreSubmissionTest: queue submissions ordered only by semaphores (IREE CTS [H]
queue/semaphore_submission_test.cc, C.3.23; classic semaphore_submission_test.h, C.1.2). Tag
``async_queue``: submissions may be made before their waits are signaled (wait-before-signal)."""

import gc
import weakref

import pytest

from reference import hal
from .conftest import (
    ALL, ANY, FAILURE_VALUE, WAIT, WHOLE, S, empty_command_buffer, expect_error, lsig, lwait, read_bytes, sl,
    spawn, with_data, zeroed,
)

pytestmark = pytest.mark.requires("async_queue")


def values(*sems):
    return tuple(s.query() for s in sems)


@pytest.mark.iree("SemaphoreSubmissionTest.SubmitWithNoCommandBuffers")
def test_submit_with_no_command_buffers(device):
    g = device.create_semaphore(0)
    device.queue_barrier([], [(g, 1)])
    g.wait(1, WAIT)
    assert g.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.SubmitAndSignal")
def test_submit_and_signal(device):
    cb = empty_command_buffer(device)
    g = device.create_semaphore(0)
    device.queue_execute([], [(g, 1)], cb)
    g.wait(1, WAIT)
    assert g.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.SubmitWithWait")
def test_submit_with_wait(device):
    cb = empty_command_buffer(device)
    w = device.create_semaphore(0)
    g = device.create_semaphore(100)
    device.queue_execute([(w, 1)], [(g, 101)], cb)  # returns without blocking
    assert g.query() == 100
    w.signal(1)
    g.wait(101, WAIT)
    assert g.query() == 101


@pytest.mark.iree("SemaphoreSubmissionTest.IndirectCommandBufferBindingTableRetainedUntilSignal")
def test_indirect_command_buffer_binding_table_retained_until_signal(device):
    data = bytes(i ^ 0x5A for i in range(256))
    src = with_data(device, data)
    dst = zeroed(device, 256)
    cb = device.create_command_buffer(hal.CommandBufferMode.ONE_SHOT, hal.CommandCategory.TRANSFER, 2)
    cb.begin()
    cb.copy_buffer(hal.BufferRef(slot=0, offset=0, length=256), hal.BufferRef(slot=1, offset=0, length=256))
    cb.end()
    w, g = sl(device, [0], [1]), sl(device, [0], [1])
    table = [hal.BufferRef(src, 0, WHOLE), hal.BufferRef(dst, 0, WHOLE)]
    device.queue_execute(w, g, cb, table)
    refs = weakref.ref(cb), weakref.ref(src)
    del cb, src  # the queue retains what the submission references
    table.clear()  # and copied the binding table during the call
    gc.collect()  # (in Python a `del` alone proves nothing: the queue must hold them, as in C)
    assert all(ref() is not None for ref in refs), "a pending submission's command buffer or buffer was freed"
    lsig(w)
    lwait(device, g)
    assert read_bytes(device, dst) == data


@pytest.mark.iree("SemaphoreSubmissionTest.SubmitWithMultipleSemaphores")
def test_submit_with_multiple_semaphores(device):
    cb = empty_command_buffer(device)
    w1, w2, g1, g2 = (device.create_semaphore(0) for _ in range(4))
    device.queue_execute([(w1, 1), (w2, 1)], [(g1, 1), (g2, 1)], cb)
    assert values(g1, g2) == (0, 0)
    w1.signal(1)
    w2.signal(1)
    lwait(device, [(g1, 1), (g2, 1)])
    assert values(g1, g2) == (1, 1)


def _host_and_device_setup(device):
    """hw → (host thread) → hs; dw → (device) → ds."""
    hw, dw, hs, ds = (device.create_semaphore(0) for _ in range(4))
    device.queue_execute([(dw, 1)], [(ds, 1)], empty_command_buffer(device))

    def host_work():
        hw.wait(1, WAIT)
        hs.signal(1)

    t = spawn(host_work)
    assert values(hs, ds) == (0, 0)
    return hw, dw, hs, ds, t


@pytest.mark.iree("SemaphoreSubmissionTest.WaitAllHostAndDeviceSemaphores")
def test_wait_all_host_and_device_semaphores(device):
    hw, dw, hs, ds, t = _host_and_device_setup(device)
    hw.signal(1)
    dw.signal(1)
    device.wait_semaphores(ALL, [(hs, 1), (ds, 1)], WAIT)
    t.finish()
    assert values(hs, ds) == (1, 1)


@pytest.mark.iree("SemaphoreSubmissionTest.WaitAnyHostAndDeviceSemaphoresAndDeviceSignals")
def test_wait_any_host_and_device_semaphores_and_device_signals(device):
    hw, dw, hs, ds, t = _host_and_device_setup(device)
    dw.signal(1)
    device.wait_semaphores(ANY, [(hs, 1), (ds, 1)], WAIT)
    assert values(hs, ds) == (0, 1)
    hw.signal(1)
    t.finish()
    assert hs.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.WaitAnyHostAndDeviceSemaphoresAndHostSignals")
def test_wait_any_host_and_device_semaphores_and_host_signals(device):
    hw, dw, hs, ds, t = _host_and_device_setup(device)
    hw.signal(1)
    device.wait_semaphores(ANY, [(hs, 1), (ds, 1)], WAIT)
    t.finish()
    assert values(hs, ds) == (1, 0)
    dw.signal(1)
    ds.wait(1, WAIT)
    assert ds.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.IntermediateSemaphoreBetweenDeviceBatches")
def test_intermediate_semaphore_between_device_batches(device):
    cb1, cb2 = empty_command_buffer(device), empty_command_buffer(device)
    s1, s2 = device.create_semaphore(0), device.create_semaphore(0)
    device.queue_execute([(s1, 1)], [(s2, 1)], cb2)  # the consumer first
    assert values(s1, s2) == (0, 0)
    device.queue_execute([], [(s1, 1)], cb1)
    s1.wait(1, WAIT)
    assert s1.query() == 1
    s2.wait(1, WAIT)
    assert s2.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.TwoBatchesWaitingOn1FormerBatchAmongst2")
def test_two_batches_waiting_on_1_former_batch_amongst_2(device):
    cb11, cb12, cb21, cb22 = (empty_command_buffer(device) for _ in range(4))
    s11, s21, s22 = (device.create_semaphore(0) for _ in range(3))
    device.queue_execute([(s11, 1)], [(s22, 1)], cb22)
    device.queue_execute([(s11, 1)], [(s21, 1)], cb21)
    device.queue_execute([], [], cb12)
    assert values(s11, s21, s22) == (0, 0, 0)
    device.queue_execute([], [(s11, 1)], cb11)
    s21.wait(1, WAIT)
    assert values(s21, s11) == (1, 1)
    s22.wait(1, WAIT)
    assert s22.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.TwoBatchesWaitingOnDifferentSemaphoreValues")
def test_two_batches_waiting_on_different_semaphore_values(device):
    cb11, cb21, cb22 = (empty_command_buffer(device) for _ in range(3))
    s11, s21, s22 = (device.create_semaphore(0) for _ in range(3))
    device.queue_execute([(s11, 2)], [(s22, 1)], cb22)
    device.queue_execute([(s11, 1)], [(s21, 1)], cb21)
    assert values(s11, s21, s22) == (0, 0, 0)
    device.queue_execute([], [(s11, 3)], cb11)  # 3 satisfies the waits for 1 and 2
    s21.wait(1, WAIT)
    assert values(s21, s11) == (1, 3)
    s22.wait(1, WAIT)
    assert s22.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.BatchWaitingOnAnotherAndHostSignal")
def test_batch_waiting_on_another_and_host_signal(device):
    cb1, cb2 = empty_command_buffer(device), empty_command_buffer(device)
    s1, s2, s3 = (device.create_semaphore(0) for _ in range(3))
    device.queue_execute([(s1, 1), (s2, 1)], [(s3, 1)], cb2)
    assert s3.query() == 0
    device.queue_execute([], [(s1, 1)], cb1)
    s1.wait(1, WAIT)
    assert s3.query() == 0  # s2 is still 0
    t = spawn(s2.signal, 1)
    s3.wait(1, WAIT)
    assert s3.query() == 1
    t.finish()


@pytest.mark.iree("SemaphoreSubmissionTest.DeviceBatchSignalAnotherAndHost")
def test_device_batch_signal_another_and_host(device):
    cb1, cb2 = empty_command_buffer(device), empty_command_buffer(device)
    s11, s12, s2 = (device.create_semaphore(0) for _ in range(3))
    device.queue_execute([(s11, 1)], [(s2, 1)], cb2)
    assert values(s11, s12, s2) == (0, 0, 0)
    waiters = [spawn(s.wait, 1, WAIT) for s in (s11, s12, s2)]
    device.queue_execute([], [(s11, 1), (s12, 1)], cb1)
    for t in waiters:
        assert t.finish() is None
    assert values(s11, s12, s2) == (1, 1, 1)


@pytest.mark.iree("SemaphoreSubmissionTest.BatchWaitingOnSmallerValueAfterSignaled")
def test_batch_waiting_on_smaller_value_after_signaled(device):
    cb = empty_command_buffer(device)
    s1, s2 = device.create_semaphore(0), device.create_semaphore(0)
    s1.signal(2)
    device.queue_execute([(s1, 1)], [(s2, 1)], cb)
    s2.wait(1, WAIT)
    assert s2.query() == 1


@pytest.mark.iree("SemaphoreSubmissionTest.BatchWaitingOnSmallerValueBeforeSignaled")
def test_batch_waiting_on_smaller_value_before_signaled(device):
    cb = empty_command_buffer(device)
    s1, s2 = device.create_semaphore(0), device.create_semaphore(0)
    device.queue_execute([(s1, 1)], [(s2, 1)], cb)
    t = spawn(s1.signal, 2)
    s2.wait(1, WAIT)
    assert s2.query() == 1
    t.finish()


@pytest.mark.iree("SemaphoreSubmissionTest.PropagateFailSignal")
def test_propagate_fail_signal(device):
    cb = empty_command_buffer(device)
    s1, s2 = device.create_semaphore(0), device.create_semaphore(0)
    device.queue_execute([(s1, 1)], [(s2, 1)], cb)
    t = spawn(s1.fail, S.CANCELLED, "PropagateFailSignal test.")
    expect_error(S.CANCELLED, s2.wait, 1, WAIT)  # [H]: the original code, not ABORTED
    t.finish()
    error = expect_error(S.CANCELLED, s2.query)  # the signal semaphore failed with that failure (Q3)
    assert "PropagateFailSignal test." in error.message  # ([C] checks the message travels too)
    assert s2.payload >= FAILURE_VALUE


@pytest.fixture
def two_queue_device(device_info):
    """The device with a second queue (``queues=2``); skipped, as IREE does, where queue 1 cannot exist."""
    try:
        dev = hal.create_device(device_info.uri, queues=2)
    except hal.HalError as e:
        pytest.skip(f"no queue 1 on {device_info.uri} ({e.code.name}: {e.message})")
    try:
        yield dev
    finally:
        dev.close()


@pytest.mark.iree("SemaphoreSubmissionTest.CrossQueueWaitBeforeSignal")
def test_cross_queue_wait_before_signal(two_queue_device):
    device = two_queue_device
    p, c = sl(device, [0], [1]), sl(device, [0], [1])
    device.queue_barrier(p, c, queue_affinity=1 << 1)
    assert values(c[0][0]) == (0,)
    device.queue_barrier([], p, queue_affinity=1 << 0)
    lwait(device, c)
    assert values(c[0][0], p[0][0]) == (1, 1)


@pytest.mark.iree("SemaphoreSubmissionTest.MultiQueueFanOutDifferentValuesBeforeSignal")
def test_multi_queue_fan_out_different_values_before_signal(two_queue_device):
    device = two_queue_device
    p, d0, d1 = (device.create_semaphore(0) for _ in range(3))
    device.queue_barrier([(p, 2)], [(d1, 1)], queue_affinity=1 << 1)
    device.queue_barrier([(p, 1)], [(d0, 1)], queue_affinity=1 << 0)
    assert values(d0, d1) == (0, 0)
    device.queue_barrier([], [(p, 3)], queue_affinity=1 << 0)
    lwait(device, [(d0, 1), (d1, 1)])
    assert values(p, d0, d1) == (3, 1, 1)
