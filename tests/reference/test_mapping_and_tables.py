"""Edge cases of host mappings, host copies and binding tables that every device shares (the
reference validation): IREE's ``buffer.c`` and HAL_SEMANTICS CB13 / Q5.1 decide.

Every wait is bounded; a hang fails the test.
"""

import pytest

from reference import hal
from tests.reference.conftest import expect

S = hal.StatusCode
BU, MA, M = hal.BufferUsage, hal.MemoryAccess, hal.CommandBufferMode
WHOLE = hal.WHOLE_BUFFER
WAIT = 10.0


def test_map_copy_of_whole_buffers_copies_the_shorter_length(dev):
    """``iree_hal_buffer_map_copy``: WHOLE_BUFFER "could mean either, so take the min"."""
    big, small = dev.allocator.allocate_buffer(64), dev.allocator.allocate_buffer(32)
    big.map_write(0, bytes(range(64)))
    small.map_write(0, b"\xff" * 32)
    hal.buffer_map_copy(big, 0, small, 0, WHOLE)
    assert small.map_read() == bytes(range(32))
    hal.buffer_map_copy(small, 8, big, 0, WHOLE)  # 24 bytes: the rest of the source
    assert big.map_read() == bytes(range(8, 32)) + bytes(range(24, 64))
    expect(S.OUT_OF_RANGE, "map_copy target [0, 64) past buffer length 32", hal.buffer_map_copy, big, 0, small, 0, 64)


def test_mapping_flush_needs_write_access_and_invalidate_read(dev):
    """``iree_hal_buffer_mapping_flush_range`` validates WRITE, ``invalidate_range`` READ."""
    buf = dev.allocator.allocate_buffer(64)
    with buf.map_range(MA.READ, 0, 16) as m:
        assert m.contents.readonly and len(m.contents) == 16
        m.invalidate(0, 16)
        expect(S.PERMISSION_DENIED, "flush: buffer allows access <MemoryAccess.READ: 1>, operation needs "
               "<MemoryAccess.WRITE: 2>", m.flush, 0, 16)
        with pytest.raises(TypeError):
            m.contents[0] = 1  # a READ mapping's bytes are not writable
    with buf.map_range(MA.DISCARD_WRITE, 16, 16) as m:
        m.contents[:] = b"\x07" * 16
        m.flush()
        expect(S.PERMISSION_DENIED, "invalidate: buffer allows access <MemoryAccess.DISCARD_WRITE: 6>, "
               "operation needs <MemoryAccess.READ: 1>", m.invalidate)
        expect(S.OUT_OF_RANGE, "flush [8, 24) past buffer length 16", m.flush, 8, 16)
    assert buf.map_read(16, 16) == b"\x07" * 16


def test_zero_length_host_fill_and_copy_still_check_their_offsets(dev):
    buf = dev.allocator.allocate_buffer(16)
    expect(S.INVALID_ARGUMENT, "map_fill offset must be an int, got str", buf.map_fill, "x", 0, 0, 1)
    expect(S.INVALID_ARGUMENT, "map_fill offset must be >= 0, got -3", buf.map_fill, -3, 0, 0, 1)
    expect(S.INVALID_ARGUMENT, "map_copy source offset must be an int, got NoneType",
           hal.buffer_map_copy, buf, None, buf, 0, 0)
    expect(S.INVALID_ARGUMENT, "map_copy target offset must be >= 0, got -1",
           hal.buffer_map_copy, buf, 0, buf, -1, 0)
    buf.map_fill(4, 0, 0, 1)  # valid: a no-op
    hal.buffer_map_copy(buf, 0, buf, 8, 0)


def test_inline_command_buffer_accepts_an_empty_wait_iterator(dev):
    """Q5.1 refuses an inline command buffer with waits: an empty iterator has none."""
    cb = dev.create_command_buffer(M.ONE_SHOT | M.ALLOW_INLINE_EXECUTION)
    cb.begin()
    cb.end()
    s = dev.create_semaphore()
    dev.queue_execute(iter([]), [(s, 1)], cb)
    s.wait(1, WAIT)
    assert s.query() == 1
    cb2 = dev.create_command_buffer(M.ONE_SHOT | M.ALLOW_INLINE_EXECUTION)
    cb2.begin()
    cb2.end()
    expect(S.INVALID_ARGUMENT, f"inline command buffer {cb2.id} submitted with a wait list",
           dev.queue_execute, (w for w in [(s, 1)]), [], cb2)


def test_binding_alignment_is_the_bindings_own_offset(indirect_dev):
    """CB13: ``binding.offset % min_byte_alignment``; a slot bound to a subspan that starts at an
    odd place of its allocation takes a 4-byte fill at its offset 0, as a direct reference does."""
    dev = indirect_dev
    root = dev.allocator.allocate_buffer(64, usage=BU.DEFAULT | BU.MAPPING)
    root.map_write(0, b"\x00" * 64)
    sub = root.subspan(2, 32)
    cb = dev.create_command_buffer(0, binding_capacity=1)
    cb.begin()
    cb.fill_buffer(hal.BufferRef(slot=0, offset=0, length=8), 0x01020304, 4)
    cb.end()
    s = dev.create_semaphore()
    dev.queue_execute([], [(s, 1)], cb, [hal.BufferRef(sub, 0, WHOLE)])
    s.wait(1, WAIT)
    assert root.map_read(0, 12) == b"\x00\x00" + bytes([4, 3, 2, 1]) * 2 + b"\x00\x00"
    expect(S.INVALID_ARGUMENT, "binding_table[0]: offset 2 not aligned to 4",
           dev.queue_execute, [], [(s, 2)], cb, [hal.BufferRef(sub, 2, 16)])


@pytest.mark.parametrize("start,pattern_length,length", [(1, 4, 4), (1, 4, 12), (3, 2, 2), (2, 4, 8), (3, 4, 16),
                                                         (1, 2, 10)])
def test_fill_of_a_subspan_starting_off_the_pattern_alignment(dev, start, pattern_length, length):
    """A fill at a subspan's offset 0 is aligned for the HAL even where the subspan starts at an odd
    byte of its allocation (OpenCL's clEnqueueFillBuffer is not: the backend splits it)."""
    root = dev.allocator.allocate_buffer(64)
    root.map_write(0, b"\xee" * 64)
    sub = root.subspan(start, 40)
    pattern = 0x44332211 & ((1 << (8 * pattern_length)) - 1)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], sub, 0, length, pattern, pattern_length)
    s.wait(1, WAIT)
    filled = pattern.to_bytes(pattern_length, "little") * (length // pattern_length)
    assert root.map_read() == b"\xee" * start + filled + b"\xee" * (64 - start - length)
