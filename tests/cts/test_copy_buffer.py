"""CommandBufferCopyBufferTest (IREE CTS [H] command_buffer/copy_buffer_test.cc, C.3.10; classic
command_buffer_copy_buffer_test.h, C.1.4). Runs in both recording modes: slot 0 = source, slot 1 = target."""

import pytest

from reference import hal
from .conftest import Recording, alloc_uninit, det, hostbuf, read_bytes, with_data, zeroed

K = 1024
TRANSFER = hal.CommandCategory.TRANSFER


@pytest.mark.iree("CommandBufferCopyBufferTest.CopyWholeBuffer")
def test_copy_whole_buffer(device, recording_mode):
    rec = Recording(recording_mode, 2)
    host = hostbuf(device, K)
    host.map_write(0, b"\x54" * K)
    dev = alloc_uninit(device, K)
    cb = rec.create(device, categories=TRANSFER)
    cb.begin()
    cb.copy_buffer(rec.ref(0, host, 0, K), rec.ref(1, dev, 0, K))
    cb.end()
    rec.submit_and_wait(device, cb)
    assert dev.map_read(0, K) == b"\x54" * K


# The classic CopySubBufferIndirect is this test's indirect instantiation.
@pytest.mark.iree("CommandBufferCopyBufferTest.CopySubBuffer", "CommandBufferCopyBufferTest.CopySubBufferIndirect")
def test_copy_sub_buffer(device, recording_mode):
    rec = Recording(recording_mode, 2)
    dev = alloc_uninit(device, K)
    host = hostbuf(device, K // 2)
    host.map_write(0, b"\x88" * (K // 2))
    n = K // 2 - 4  # 508 bytes: host[4, 512) -> dev[8, 516)
    cb = rec.create(device, categories=TRANSFER)
    cb.begin()
    cb.fill_buffer(rec.ref(1, dev, 0, 8), 0x00, 1)
    cb.copy_buffer(rec.ref(0, host, 4, n), rec.ref(1, dev, 8, n))
    cb.fill_buffer(rec.ref(1, dev, 8 + n, K - (8 + n)), 0x00, 1)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert dev.map_read(0, K) == bytes(8) + b"\x88" * n + bytes(K - 8 - n)


LENGTHS = (4, 8, 16, 31, 32, 33, 64, 128, 256, 1024, 4096, 16384, 65536)
OFFSET_CLASSES = {"aligned16": (0, 0), "aligned8_not16": (8, 8), "aligned4_not8": (4, 4), "byte_misaligned": (1, 2)}
COPY_CASES = [(name, so, do, n) for n in LENGTHS for name, (so, do) in OFFSET_CLASSES.items()]
COPY_CASES.append(("aligned16_1MiB", 0, 0, 1 << 20))


def expected_copy(size, src_off, dst_off, length):
    src = det(size)
    return bytes(dst_off) + src[src_off:src_off + length] + bytes(size - dst_off - length)


@pytest.mark.iree("CommandBufferCopyBufferTest.CopySizeAndAlignmentClasses")
def test_copy_size_and_alignment_classes(device, recording_mode):
    for name, src_off, dst_off, length in COPY_CASES:
        rec = Recording(recording_mode, 2)
        size = max(src_off, dst_off) + length + 16
        src = with_data(device, det(size))
        dst = zeroed(device, size)
        cb = rec.create(device, categories=TRANSFER)
        cb.begin()
        cb.copy_buffer(rec.ref(0, src, src_off, length), rec.ref(1, dst, dst_off, length))
        cb.end()
        rec.submit_and_wait(device, cb)
        assert read_bytes(device, dst) == expected_copy(size, src_off, dst_off, length), \
            f"case {name} length {length}"
