"""A queue host call signals only after its function returned, on every device (HAL_SEMANTICS Q12).

Queue work that waits for a host call's signal must see what the function did. The stream engines
(``opencl``, ``cuda``, ``metal`` and their models ``sim:opencl``, ``sim:cuda``) recorded a
device-signal event for a host call at its issue, like for any op, and let later waits reuse it: the
device reached that event before the host ran the function, so a copy waiting for the host call read
the buffer before the function wrote it.
"""

import time

import pytest

from reference import hal
from tests.conftest import WAIT
from tests.reference.conftest import open_device

BUSY = 32 << 20  # bytes: a fill that keeps a queue busy for milliseconds (simulated or real)
DEVICES = [info for info in hal.available_devices() if "host_calls" in info.capabilities]


@pytest.mark.parametrize("info", DEVICES, ids=[info.uri for info in DEVICES])
def test_work_waiting_for_a_host_call_sees_what_the_function_wrote(info):
    dev = open_device(info.uri)
    try:
        src, dst = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
        busy = dev.allocator.allocate_buffer(BUSY)
        called, copied = dev.create_semaphore(), dev.create_semaphore()

        def fn(args, context):
            time.sleep(0.02)  # on a real device, the queue would be long past a device-side event
            src.map_write(0, b"\x07" * 16)

        # The host call is issued at once, behind a long fill on its queue: when the copy is submitted
        # the queue has not reached it yet, so it cannot have run, and a device-side signal event of
        # it would be recorded (and found by the copy's wait).
        dev.queue_fill([], [], busy, 0, BUSY, 1, 1)
        dev.queue_host_call([], [(called, 1)], fn, (0, 0, 0, 0))
        dev.sleep(0.0001)
        dev.queue_copy([(called, 1)], [(copied, 1)], src, 0, dst, 0, 16)
        dev.queue_barrier([(copied, 1)], [(copied, 2)])  # a wait after the host call's value, too
        copied.wait(2, timeout=WAIT)
        assert dst.map_read() == b"\x07" * 16
    finally:
        dev.close()
