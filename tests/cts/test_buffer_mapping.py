"""BufferMappingTest: host mapping helpers (IREE CTS [H] buffer/mapping_test.cc, C.3.8; classic
buffer_mapping_test.h, C.1.11). Tag ``mapping``. ``ALLOC(n)`` = DEVICE_LOCAL|HOST_VISIBLE,
TRANSFER|MAPPING."""

import pytest

from reference import hal
from .conftest import BU, MA, MT, WHOLE

pytestmark = pytest.mark.requires("mapping")

K = 1024


def alloc(device, n):
    return device.allocator.allocate_buffer(n, MT.DEVICE_LOCAL | MT.HOST_VISIBLE, BU.TRANSFER | BU.MAPPING)


def ff(n):
    return b"\xff" * n


def zz(n):
    return bytes(n)


@pytest.mark.iree("BufferMappingTest.AllocatorSupportsBufferMapping")
def test_allocator_supports_buffer_mapping(device):
    compat, size = device.allocator.query_buffer_compatibility(K, MT.HOST_VISIBLE, BU.MAPPING)
    assert compat & hal.BufferCompatibility.ALLOCATABLE
    assert size >= K
    buf = alloc(device, size)
    assert (buf.memory_type & MT.HOST_VISIBLE) == MT.HOST_VISIBLE
    assert (buf.allowed_usage & BU.MAPPING) == BU.MAPPING
    assert buf.allocation_size >= size


@pytest.mark.iree("BufferMappingTest.ZeroWholeBuffer")
def test_zero_whole_buffer(device):
    buf = alloc(device, K)
    buf.map_fill(0, WHOLE, 0xAA, 1)  # so that zeroing is observable
    buf.map_zero(0, WHOLE)
    assert buf.map_read(0, K) == zz(K)


@pytest.mark.iree("BufferMappingTest.ZeroWithOffset")
def test_zero_with_offset(device):
    buf = alloc(device, 16)
    buf.map_fill(0, WHOLE, 0xFF, 1)
    buf.map_zero(4, 8)
    assert buf.map_read(0, 16) == ff(4) + zz(8) + ff(4)


@pytest.mark.iree("BufferMappingTest.ZeroSubspan")
def test_zero_subspan(device):
    buf = alloc(device, 16)
    buf.map_fill(0, WHOLE, 0xFF, 1)
    sub = buf.subspan(4, 8)
    sub.map_zero(4, 4)
    assert buf.map_read(0, 16) == ff(8) + zz(4) + ff(4)
    assert sub.map_read(0, 8) == ff(4) + zz(4)


@pytest.mark.iree("BufferMappingTest.FillEmpty")
def test_fill_empty(device):
    buf = alloc(device, K)
    buf.map_zero(0, WHOLE)
    buf.map_fill(0, 0, 0xFF, 1)
    assert buf.map_read(0, K) == zz(K)


@pytest.mark.iree("BufferMappingTest.FillWholeBuffer")
def test_fill_whole_buffer(device):
    buf = alloc(device, K)
    buf.map_fill(0, WHOLE, 0xFF, 1)
    assert buf.map_read(0, K) == ff(K)


@pytest.mark.iree("BufferMappingTest.FillWithOffset")
def test_fill_with_offset(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    buf.map_fill(4, 8, 0xFF, 1)
    assert buf.map_read(0, 16) == zz(4) + ff(8) + zz(4)


@pytest.mark.iree("BufferMappingTest.FillSubspan")
def test_fill_subspan(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    sub = buf.subspan(4, 8)
    sub.map_fill(4, 4, 0xFF, 1)
    assert buf.map_read(0, 16) == zz(8) + ff(4) + zz(4)
    assert sub.map_read(0, 8) == zz(4) + ff(4)


@pytest.mark.iree("BufferMappingTest.ReadData")
def test_read_data(device):
    buf = alloc(device, 16)
    buf.map_zero(0, 8)
    buf.map_fill(8, 8, 0xFF, 1)
    assert buf.map_read(0, 16) == zz(8) + ff(8)
    assert buf.map_read(4, 8) == zz(4) + ff(4)


@pytest.mark.iree("BufferMappingTest.ReadDataSubspan")
def test_read_data_subspan(device):
    buf = alloc(device, 16)
    for i, byte in enumerate((0xAA, 0xBB, 0xCC, 0xDD)):
        buf.map_fill(4 * i, 4, byte, 1)
    sub = buf.subspan(4, 8)
    assert sub.map_read(0, 8) == b"\xbb" * 4 + b"\xcc" * 4
    assert sub.map_read(4, 4) == b"\xcc" * 4


@pytest.mark.iree("BufferMappingTest.WriteDataWholeBuffer")
def test_write_data_whole_buffer(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    buf.map_write(0, ff(16))
    assert buf.map_read(0, 16) == ff(16)


@pytest.mark.iree("BufferMappingTest.WriteDataWithOffset")
def test_write_data_with_offset(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    data = bytes.fromhex("1122334455667788")
    buf.map_write(4, data)
    assert buf.map_read(0, 16) == zz(4) + data + zz(4)


@pytest.mark.iree("BufferMappingTest.WriteDataSubspan")
def test_write_data_subspan(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    sub = buf.subspan(4, 8)
    data = bytes.fromhex("11223344")
    sub.map_write(4, data)
    assert buf.map_read(0, 16) == zz(8) + data + zz(4)
    assert sub.map_read(0, 8) == zz(4) + data


@pytest.mark.iree("BufferMappingTest.CopyData")
def test_copy_data(device):
    a = alloc(device, K)
    b = alloc(device, K)
    b.map_zero(0, WHOLE)
    a.map_fill(0, K, 0x07, 1)
    hal.buffer_map_copy(a, 0, b, 0, K)
    assert b.map_read(0, K) == b"\x07" * K


@pytest.mark.iree("BufferMappingTest.MapRangeRead")
def test_map_range_read(device):
    buf = alloc(device, 16)
    buf.map_fill(0, WHOLE, 0xEF, 1)
    mapping = buf.map_range(MA.READ, 0, 16)
    try:
        assert mapping.buffer is buf
        assert len(mapping.contents) >= 16
        assert bytes(mapping.contents[:16]) == b"\xef" * 16
    finally:
        mapping.unmap()


@pytest.mark.iree("BufferMappingTest.MapRangeWrite")
def test_map_range_write(device):
    buf = alloc(device, 16)
    buf.map_zero(0, WHOLE)
    mapping = buf.map_range(MA.DISCARD_WRITE, 0, 16)
    try:
        assert mapping.buffer is buf
        assert len(mapping.contents) >= 16
        mapping.contents[:16] = b"\x12" * 16
        mapping.flush(0, 16)
        assert buf.map_read(0, 16) == b"\x12" * 16
    finally:
        mapping.unmap()
