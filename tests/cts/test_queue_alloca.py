"""QueueAllocaTest: queue-ordered allocation from the device's default pool (IREE CTS [H]
queue/queue_alloca_test.cc, C.3.25). Parameters: OPTIMAL_FOR_DEVICE, access ALL, usage
TRANSFER|DISPATCH_STORAGE unless stated. Explicit pools and multi-queue cases are not ported (docs/cts.md)."""

import pytest

from reference import hal
from .conftest import BU, MA, MT, S, expect_error, lsig, lwait, read_bytes, sl, u32s

USAGE = BU.TRANSFER | BU.DISPATCH_STORAGE
PF = hal.BufferPlacementFlags


def alloca(device, wait, signal, size, access=MA.ALL):
    return device.queue_alloca(wait, signal, size, MT.OPTIMAL_FOR_DEVICE, USAGE, access)


def signal_list(device):
    return sl(device, [0], [1])


def fill_and_wait(device, buf, size, pattern, plen, wait=()):
    g = signal_list(device)
    device.queue_fill(list(wait), g, buf, 0, size, pattern, plen)
    lwait(device, g)


def dealloca_and_wait(device, buf, wait=()):
    d = signal_list(device)
    device.queue_dealloca(list(wait), d, buf)
    lwait(device, d)


@pytest.mark.iree("QueueAllocaTest.BasicAlloca")
def test_basic_alloca(device):
    g = signal_list(device)
    buf = alloca(device, [], g, 1024)
    assert isinstance(buf, hal.Buffer)  # returned at once, before the queue commits it
    lwait(device, g)
    assert buf.byte_length >= 1024
    fill_and_wait(device, buf, 1024, 0xAB, 1)
    assert read_bytes(device, buf, 0, 1024) == b"\xab" * 1024


@pytest.mark.iree("QueueAllocaTest.AllocaWithWaitSemaphores")
def test_alloca_with_wait_semaphores(device):
    w, g = signal_list(device), signal_list(device)
    buf = alloca(device, w, g, 512)
    assert g[0][0].query() == 0  # list_poll(G) is false: parked behind W
    lsig(w)
    lwait(device, g)
    fill_and_wait(device, buf, 512, 0xCD, 1)
    assert read_bytes(device, buf, 0, 512) == b"\xcd" * 512


@pytest.mark.iree("QueueAllocaTest.AllocaDeallocaCycle")
def test_alloca_dealloca_cycle(device):
    for pattern in (0xDEADCAFE, 0xCAFEF00D):
        a = signal_list(device)
        buf = alloca(device, [], a, 2048)
        lwait(device, a)
        fill_and_wait(device, buf, 2048, pattern, 4)
        assert read_bytes(device, buf, 0, 2048) == u32s(pattern) * 512
        dealloca_and_wait(device, buf, wait=a)


@pytest.mark.iree("QueueAllocaTest.BufferMetadata")
def test_buffer_metadata(device):
    w, g = signal_list(device), signal_list(device)
    buf = alloca(device, w, g, 4096)
    # Before the commit: the handle already carries its metadata.
    assert g[0][0].query() == 0
    assert buf.byte_length >= 4096
    assert (buf.allowed_usage & USAGE) == USAGE
    placement = buf.placement
    assert placement is not None
    assert placement.device is device
    assert placement.flags & PF.ASYNCHRONOUS
    affinity = placement.queue_affinity
    assert affinity != 0 and affinity & (affinity - 1) == 0  # exactly one queue
    lsig(w)
    lwait(device, g)
    dealloca_and_wait(device, buf)


@pytest.mark.iree("QueueAllocaTest.DeallocaReleasesMemory")
def test_dealloca_releases_memory(device):
    a = signal_list(device)
    buf = alloca(device, [], a, 256)
    lwait(device, a)
    fill_and_wait(device, buf, 256, 0x11, 1)
    dealloca_and_wait(device, buf)
    # Using the buffer after its dealloca: refused at enqueue, or its signal fails.
    g = signal_list(device)
    try:
        device.queue_fill([], g, buf, 0, 256, 0x22, 1)
    except hal.HalError as e:
        assert e.code == S.INVALID_ARGUMENT, e
        return
    expect_error(S.FAILED_PRECONDITION, lwait, device, g)


@pytest.mark.iree("QueueAllocaTest.FailedDeallocaWaitDoesNotDealloca")
def test_failed_dealloca_wait_does_not_dealloca(device):
    a = signal_list(device)
    buf = alloca(device, [], a, 256)
    lwait(device, a)
    fill_and_wait(device, buf, 256, 0xAB, 1)
    fw, d = signal_list(device), signal_list(device)
    fw[0][0].fail(S.CANCELLED, "dealloca wait failed")
    try:
        device.queue_dealloca(fw, d, buf)
    except hal.HalError as e:
        assert e.code == S.CANCELLED, e  # synchronous devices return the failed wait
    else:
        expect_error(S.CANCELLED, lwait, device, d)
    # The dealloca did not run: the buffer is still usable.
    fill_and_wait(device, buf, 256, 0xCD, 1)
    assert read_bytes(device, buf, 0, 256) == b"\xcd" * 256
    dealloca_and_wait(device, buf)


@pytest.mark.iree("QueueAllocaTest.ChainedAllocaDealloca")
def test_chained_alloca_dealloca(device):
    a, d = signal_list(device), signal_list(device)
    buf = alloca(device, [], a, 1024)
    device.queue_dealloca(a, d, buf)  # no host wait in between
    lwait(device, d)
    assert d[0][0].query() == 1


@pytest.mark.iree("QueueAllocaTest.DefaultPoolRepeatedChainedAllocaDealloca")
def test_default_pool_repeated_chained_alloca_dealloca(device):
    for i in range(32):
        a, d = signal_list(device), signal_list(device)
        buf = alloca(device, [], a, 1024)
        device.queue_dealloca(a, d, buf)
        lwait(device, d)
        assert d[0][0].query() == 1, i


@pytest.mark.iree("QueueAllocaTest.DeallocaPrefersOriginPlacement")
def test_dealloca_prefers_origin_placement(device):
    a, d = signal_list(device), signal_list(device)
    buf = alloca(device, [], a, 1024)
    # Affinity 0 names no queue: with prefer_origin the buffer's placement supplies it.
    device.queue_dealloca(a, d, buf, queue_affinity=0, prefer_origin=True)
    lwait(device, d)
    assert d[0][0].query() == 1


@pytest.mark.iree("QueueAllocaTest.ZeroAccessFlagsCanonicalized")
def test_zero_access_flags_canonicalized(device):
    a = signal_list(device)
    buf = alloca(device, [], a, 256, access=MA.NONE)
    lwait(device, a)
    assert buf.allowed_access == MA.ALL  # access 0 means MEMORY_ACCESS_ALL (Q8)
    fill_and_wait(device, buf, 256, 0x12345678, 4)
    assert read_bytes(device, buf, 0, 4) == u32s(0x12345678)
