"""AllocatorTest: buffer compatibility queries and allocation (IREE CTS [H] buffer/allocator_test.cc,
C.3.7 #1-3; classic allocator_test.h, C.1.10)."""

import pytest

from reference import hal
from .conftest import BU, MT

K = 1024
BC = hal.BufferCompatibility


@pytest.mark.iree("AllocatorTest.BaselineBufferCompatibility")
def test_baseline_buffer_compatibility(device):
    alloc = device.allocator
    # Transfer between host-local (device-visible) and device-local (host-visible) memory.
    host_compat, host_size = alloc.query_buffer_compatibility(K, MT.HOST_LOCAL | MT.DEVICE_VISIBLE, BU.TRANSFER)
    dev_compat, dev_size = alloc.query_buffer_compatibility(K, MT.HOST_VISIBLE | MT.DEVICE_LOCAL, BU.TRANSFER)
    assert host_size >= K and dev_size >= K
    need = BC.ALLOCATABLE | BC.QUEUE_TRANSFER
    assert (host_compat & need) == need or (dev_compat & need) == need
    # Dispatch on host-local (device-visible) memory.
    compat, size = alloc.query_buffer_compatibility(K, MT.HOST_LOCAL | MT.DEVICE_VISIBLE, BU.DISPATCH_STORAGE)
    assert size >= K
    need = BC.ALLOCATABLE | BC.QUEUE_DISPATCH
    assert (compat & need) == need


@pytest.mark.iree("AllocatorTest.AllocateBuffer")
def test_allocate_buffer(device):
    buf = device.allocator.allocate_buffer(K, MT.DEVICE_LOCAL, BU.TRANSFER)
    assert isinstance(buf, hal.Buffer)
    assert (buf.memory_type & MT.DEVICE_LOCAL) == MT.DEVICE_LOCAL
    assert (buf.allowed_usage & BU.TRANSFER) == BU.TRANSFER
    assert buf.allocation_size >= K
    assert buf.byte_length == K


@pytest.mark.iree("AllocatorTest.AllocateEmptyBuffer")
def test_allocate_empty_buffer(device):
    buf = device.allocator.allocate_buffer(0, MT.DEVICE_LOCAL, BU.TRANSFER)
    assert isinstance(buf, hal.Buffer)
    assert buf.byte_length == 0
