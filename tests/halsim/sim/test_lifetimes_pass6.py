"""A finished op keeps nothing alive in the model: the host's last reference to its buffer is the last
one, and the trace's ``host_release`` comes when the host drops it (the Metal queue loop and the idle
dispatch streams of sim:cuda/sim:opencl held their last op until the next one)."""

from __future__ import annotations

import gc
import weakref

import pytest

from reference import hal
from tests.conftest import WAIT


@pytest.mark.parametrize("uri", ["sim", "sim:metal", "sim:cuda", "sim:opencl", "sim:sync"])
def test_a_finished_ops_buffer_goes_when_the_host_drops_it(uri):
    dev = hal.create_device(uri)
    try:
        s = dev.create_semaphore()
        buf = dev.allocator.allocate_buffer(1 << 20)
        dev.queue_fill([], [(s, 1)], buf, 0, 1 << 20, 7, 1)
        s.wait(1, WAIT)
        ref, bid = weakref.ref(buf), buf.id
        del buf
        gc.collect()
        dev.sleep(0.001)
        assert ref() is None
        assert [e["res"] for e in dev.trace.events("host_release") if e["res"] == bid] == [bid]
    finally:
        dev.close()
