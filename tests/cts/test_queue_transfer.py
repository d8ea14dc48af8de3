"""QueueTransferTest: queue_fill / queue_update / queue_copy / queue_barrier (IREE CTS [H]
queue/queue_transfer_test.cc, C.3.24). Each op is submitted with no waits and a fresh signal semaphore
(``QueueXAndWait``) unless the test chains operations through semaphores."""

import pytest

from .conftest import (
    det, fillexp, filled, lsig, lwait, read_bytes, sl, u16s, u32s, with_data, zeroed,
)

K = 1024
UPDATE_CHUNK = 64 * 1024  # IREE_HAL_COMMAND_BUFFER_MAX_UPDATE_SIZE


def signal_list(device):
    return sl(device, [0], [1])


def fill_and_wait(device, buf, offset, length, pattern, plen):
    g = signal_list(device)
    device.queue_fill([], g, buf, offset, length, pattern, plen)
    lwait(device, g)


def update_and_wait(device, source, source_offset, buf, target_offset, length):
    g = signal_list(device)
    device.queue_update([], g, source, source_offset, buf, target_offset, length)
    lwait(device, g)


def copy_and_wait(device, src, src_off, dst, dst_off, length):
    g = signal_list(device)
    device.queue_copy([], g, src, src_off, dst, dst_off, length)
    lwait(device, g)


# -- fill ----------------------------------------------------------------------------------------------

@pytest.mark.iree("QueueTransferTest.FillEntireBuffer_1Byte")
def test_fill_entire_buffer_1byte(device):
    buf = zeroed(device, K)
    fill_and_wait(device, buf, 0, K, 0xAB, 1)
    assert read_bytes(device, buf) == b"\xab" * K


@pytest.mark.iree("QueueTransferTest.FillEntireBuffer_2Byte")
def test_fill_entire_buffer_2byte(device):
    buf = zeroed(device, K)
    fill_and_wait(device, buf, 0, K, 0xBEEF, 2)
    assert read_bytes(device, buf) == u16s(0xBEEF) * (K // 2)


@pytest.mark.iree("QueueTransferTest.FillEntireBuffer_4Byte")
def test_fill_entire_buffer_4byte(device):
    buf = zeroed(device, 4096)
    fill_and_wait(device, buf, 0, 4096, 0xDEADCAFE, 4)
    assert read_bytes(device, buf) == u32s(0xDEADCAFE) * 1024


@pytest.mark.iree("QueueTransferTest.FillSubrange")
def test_fill_subrange(device):
    buf = zeroed(device, 256)
    fill_and_wait(device, buf, 64, 128, 0xCAFEF00D, 4)
    assert read_bytes(device, buf) == bytes(64) + u32s(0xCAFEF00D) * 32 + bytes(64)


@pytest.mark.iree("QueueTransferTest.FillLargeBuffer")
def test_fill_large_buffer(device):
    size = 256 * K
    buf = zeroed(device, size)
    fill_and_wait(device, buf, 0, size, 0x12345678, 4)
    assert read_bytes(device, buf) == u32s(0x12345678) * (size // 4)


# (pattern_length, offset, length, pattern): the command-buffer matrix plus three 8-byte cases.
FILL_CASES = [
    (1, 0, 4, 0xA5), (1, 3, 31, 0x5A), (1, 17, 32, 0xC3), (1, 1, 33, 0x3C), (1, 16, 64, 0xD7),
    (1, 7, 1024, 0x19), (1, 31, 65536, 0xE1),
    (2, 0, 4, 0xBEEF), (2, 2, 30, 0xCAFE), (2, 6, 32, 0x1234), (2, 18, 34, 0xA1B2), (2, 4, 1024, 0x0F0E),
    (2, 14, 65536, 0x55AA),
    (4, 0, 4, 0xDEADCAFE), (4, 4, 28, 0xCAFEF00D), (4, 8, 32, 0x12345678), (4, 20, 36, 0xA5A55A5A),
    (4, 4, 1024, 0x0F1E2D3C), (4, 12, 65536, 0x55AA33CC),
    (1, 0, 8, 0x5B), (2, 0, 8, 0x1234), (4, 0, 8, 0xF00DCAFE),
]


@pytest.mark.iree("QueueTransferTest.FillSizeAlignmentAndPatternClasses")
def test_fill_size_alignment_and_pattern_classes(device):
    assert len(FILL_CASES) == 22
    for plen, offset, length, pattern in FILL_CASES:
        size = offset + length + 16
        buf = zeroed(device, size)
        fill_and_wait(device, buf, offset, length, pattern, plen)
        assert read_bytes(device, buf) == fillexp(size, offset, length, pattern, plen), \
            (plen, offset, length, hex(pattern))


# -- update --------------------------------------------------------------------------------------------

@pytest.mark.iree("QueueTransferTest.UpdateEntireBuffer")
def test_update_entire_buffer(device):
    data = u32s(*range(100, 164))
    buf = zeroed(device, len(data))
    update_and_wait(device, data, 0, buf, 0, len(data))
    assert read_bytes(device, buf) == data


@pytest.mark.iree("QueueTransferTest.UpdateSubrange")
def test_update_subrange(device):
    data = bytes(range(1, 65))
    buf = zeroed(device, 256)
    update_and_wait(device, data, 0, buf, 32, 64)
    assert read_bytes(device, buf) == bytes(32) + data + bytes(256 - 96)


@pytest.mark.iree("QueueTransferTest.UpdateWithSourceOffset")
def test_update_with_source_offset(device):
    source = bytes(range(128))
    buf = zeroed(device, 64)
    update_and_wait(device, source, 64, buf, 0, 64)
    assert read_bytes(device, buf) == bytes(range(64, 128))


@pytest.mark.iree("QueueTransferTest.UpdateLargerThanCommandBufferLimit")
def test_update_larger_than_command_buffer_limit(device):
    length, so, to = 2 * UPDATE_CHUNK + 37, 11, 13
    size = to + length + 7
    source = det(so + length)
    buf = zeroed(device, size)
    update_and_wait(device, source, so, buf, to, length)
    assert read_bytes(device, buf) == bytes(to) + source[so:so + length] + bytes(7)


@pytest.mark.iree("QueueTransferTest.UpdateCapturesSourceBeforeWaitResolves")
def test_update_captures_source_before_wait_resolves(device):
    length, so, to = 2 * UPDATE_CHUNK + 97, 7, 5
    size = to + length + 8
    original = det(so + length)
    source = bytearray(original)
    buf = zeroed(device, size)
    w, g = sl(device, [0], [1]), sl(device, [0], [1])
    device.queue_update(w, g, source, so, buf, to, length)
    source[:] = b"\xee" * len(source)  # the queue captured the bytes during the call
    lsig(w)
    lwait(device, g)
    assert read_bytes(device, buf) == bytes(to) + original[so:so + length] + bytes(8)


UPDATE_CASES = [(0, 0, 4), (3, 0, 8), (5, 4, 8), (1, 1, 4), (0, 0, 16)]  # (source_offset, target_offset, length)


@pytest.mark.iree("QueueTransferTest.UpdateSizeAndAlignmentClasses")
def test_update_size_and_alignment_classes(device):
    for so, to, length in UPDATE_CASES:
        source = det(so + length + 8)
        size = to + length + 8
        buf = zeroed(device, size)
        update_and_wait(device, source, so, buf, to, length)
        assert read_bytes(device, buf) == bytes(to) + source[so:so + length] + bytes(8), (so, to, length)


# -- copy ----------------------------------------------------------------------------------------------

@pytest.mark.iree("QueueTransferTest.CopyEntireBuffer")
def test_copy_entire_buffer(device):
    src = filled(device, 512, 0xAAAAAAAA)
    dst = zeroed(device, 512)
    copy_and_wait(device, src, 0, dst, 0, 512)
    assert read_bytes(device, dst) == u32s(0xAAAAAAAA) * 128


@pytest.mark.iree("QueueTransferTest.CopyWithOffsets")
def test_copy_with_offsets(device):
    data = u32s(*range(64))
    src = with_data(device, data)
    dst = zeroed(device, 256)
    copy_and_wait(device, src, 64, dst, 128, 64)
    assert read_bytes(device, dst) == bytes(128) + data[64:128] + bytes(64)


@pytest.mark.iree("QueueTransferTest.CopyLargeBuffer")
def test_copy_large_buffer(device):
    size = 256 * K
    src = filled(device, size, 0xFEEDFACE)
    dst = zeroed(device, size)
    copy_and_wait(device, src, 0, dst, 0, size)
    assert read_bytes(device, dst) == u32s(0xFEEDFACE) * (size // 4)


LENGTHS = (4, 8, 16, 31, 32, 33, 64, 128, 256, 1024, 4096, 16384, 65536)
OFFSET_CLASSES = ((0, 0), (8, 8), (4, 4), (1, 2))  # aligned16, aligned8_not16, aligned4_not8, byte_misaligned
COPY_CASES = [(so, do, n) for n in LENGTHS for so, do in OFFSET_CLASSES] + [(0, 0, 1 << 20)]


@pytest.mark.iree("QueueTransferTest.CopySizeAndAlignmentClasses")
def test_copy_size_and_alignment_classes(device):
    for so, do, length in COPY_CASES:
        size = max(so, do) + length + 16
        data = det(size)
        src = with_data(device, data)
        dst = zeroed(device, size)
        copy_and_wait(device, src, so, dst, do, length)
        assert read_bytes(device, dst) == bytes(do) + data[so:so + length] + bytes(size - do - length), \
            (so, do, length)


@pytest.mark.iree("QueueTransferTest.BurstCopySubmit")
def test_burst_copy_submit(device):
    n, slice_size = 64, 4096
    source = zeroed(device, slice_size)
    target = zeroed(device, n * slice_size)
    for it in range(64):
        source.map_fill(0, slice_size, 0xC0DE0000 | it, 4)
        signals = sl(device, [0] * n, [1] * n)
        for i in range(n):  # independent copies: no waits, each its own signal
            device.queue_copy([], signals[i:i + 1], source, 0, target, i * slice_size, slice_size)
        lwait(device, signals)
    assert read_bytes(device, target) == u32s(0xC0DE003F) * (n * slice_size // 4)


# -- chains --------------------------------------------------------------------------------------------

@pytest.mark.iree("QueueTransferTest.ChainedFillThenCopy")
def test_chained_fill_then_copy(device):
    source, target = zeroed(device, 256), zeroed(device, 256)
    f, c = signal_list(device), signal_list(device)
    device.queue_fill([], f, source, 0, 256, 0x11223344, 4)
    device.queue_copy(f, c, source, 0, target, 0, 256)
    lwait(device, c)  # only the end of the chain
    assert read_bytes(device, target) == u32s(0x11223344) * 64


@pytest.mark.iree("QueueTransferTest.ChainedUpdateThenCopy")
def test_chained_update_then_copy(device):
    data = u32s(*range(42, 42 + 64))
    source, target = zeroed(device, len(data)), zeroed(device, len(data))
    u, c = signal_list(device), signal_list(device)
    device.queue_update([], u, data, 0, source, 0, len(data))
    device.queue_copy(u, c, source, 0, target, 0, len(data))
    lwait(device, c)
    assert read_bytes(device, target) == data


@pytest.mark.iree("QueueTransferTest.ChainedFillCopyFill")
def test_chained_fill_copy_fill(device):
    a, b = zeroed(device, 256), zeroed(device, 256)
    s1, s2, s3 = signal_list(device), signal_list(device), signal_list(device)
    device.queue_fill([], s1, a, 0, 256, 0xAA, 1)
    device.queue_copy(s1, s2, a, 0, b, 0, 256)
    device.queue_fill(s2, s3, a, 0, 256, 0xBB, 1)  # write-after-read: must not overtake the copy
    lwait(device, s3)
    assert read_bytes(device, b) == b"\xaa" * 256
    assert read_bytes(device, a) == b"\xbb" * 256


@pytest.mark.iree("QueueTransferTest.BarrierSignals")
def test_barrier_signals(device):
    g = signal_list(device)
    device.queue_barrier([], g)
    lwait(device, g)
    assert g[0][0].query() == 1


@pytest.mark.iree("QueueTransferTest.BarrierPreservesOrdering")
def test_barrier_preserves_ordering(device):
    source, target = zeroed(device, 256), zeroed(device, 256)
    f, b, c = signal_list(device), signal_list(device), signal_list(device)
    device.queue_fill([], f, source, 0, 256, 0xBAADF00D, 4)
    device.queue_barrier(f, b)
    device.queue_copy(b, c, source, 0, target, 0, 256)
    lwait(device, c)
    assert read_bytes(device, target) == u32s(0xBAADF00D) * 64
