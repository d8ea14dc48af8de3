"""Closing a device cancels the work still waiting: its signals fail with CANCELLED "queue shutting
down" ([H] task_queue.c), on every asynchronous device — the real OpenCL backend included, where
such work sits on an in-order queue behind a user event (it reported the API's ABORTED "command
failed with status -1" until 2026-11-24)."""

import pytest

from reference import hal

DEVICES = [info for info in hal.available_devices() if "async_queue" in info.capabilities]


@pytest.mark.parametrize("info", DEVICES, ids=[info.uri for info in DEVICES])
def test_close_cancels_work_waiting_for_a_value_never_signalled(info):
    try:
        dev = hal.create_device(info.uri)
    except hal.HalError as e:
        if e.code == hal.StatusCode.UNAVAILABLE:
            pytest.skip(f"device {info.uri} unavailable: {e.message}")
        raise
    gate, s, u = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(64)
    dev.queue_fill([(gate, 1)], [(s, 1)], buf, 0, 64, 1, 1)
    dev.queue_fill([(s, 1)], [(u, 1)], buf, 0, 64, 2, 1)
    dev.close()
    for sem in (s, u):
        e = pytest.raises(hal.HalError, sem.query).value
        assert (e.code, e.message) == (hal.StatusCode.CANCELLED, "queue shutting down")
    assert buf.map_read() == bytes(64)
