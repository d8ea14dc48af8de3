"""CommandBufferStressTest: many small submissions and one large command buffer (IREE CTS [H]
command_buffer/stress_test.cc, C.3.13)."""

import pytest

from reference import hal
from .conftest import MA, alloc_uninit, read_bytes, submit_and_wait, u32s, zeroed

TRANSFER = hal.CommandCategory.TRANSFER
N = 4096


def _one_shot(device):
    return device.create_command_buffer(hal.CommandBufferMode.ONE_SHOT, TRANSFER, 0)


@pytest.mark.iree("CommandBufferStressTest.RapidFillSubmit")
def test_rapid_fill_submit(device):
    buf = zeroed(device, N)
    for i in range(200):
        cb = _one_shot(device)
        cb.begin()
        cb.fill_buffer(hal.BufferRef(buf, 0, N), 0xBEEF0000 | i, 4)
        cb.end()
        submit_and_wait(device, cb)
    assert read_bytes(device, buf) == u32s(0xBEEF00C7) * (N // 4)


@pytest.mark.iree("CommandBufferStressTest.RapidCopySubmit")
def test_rapid_copy_submit(device):
    source = alloc_uninit(device, N)
    target = zeroed(device, N)
    for i in range(200):
        mapping = source.map_range(MA.DISCARD_WRITE, 0, N)
        mapping.contents[:] = u32s(0xCAFE0000 | i) * (N // 4)
        mapping.unmap()
        cb = _one_shot(device)
        cb.begin()
        cb.copy_buffer(hal.BufferRef(source, 0, N), hal.BufferRef(target, 0, N))
        cb.end()
        submit_and_wait(device, cb)
        assert read_bytes(device, target, 0, 4) == u32s(0xCAFE0000 | i)
    assert read_bytes(device, target) == u32s(0xCAFE00C7) * (N // 4)


@pytest.mark.iree("CommandBufferStressTest.LargeFillCommandBuffer")
def test_large_fill_command_buffer(device):
    count = 512
    buf = zeroed(device, 4 * count)
    cb = device.create_command_buffer(hal.CommandBufferMode.DEFAULT, TRANSFER, 0)
    cb.begin()
    for i in range(count):
        cb.fill_buffer(hal.BufferRef(buf, 4 * i, 4), 0xBD370000 | i, 4)
    cb.end()
    submit_and_wait(device, cb)
    assert read_bytes(device, buf) == u32s(*(0xBD370000 | i for i in range(count)))
