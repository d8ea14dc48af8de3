"""Happens-before around host threads sharing an in-order queue, work a host call's function
enqueues or waits for, and host accesses racing a transient's dealloca: exact findings on every
device where the program means the same (adversarial pass 4)."""

import threading

import pytest

from halsim.checks import check_trace
from reference import hal
from tests.conftest import WAIT, join

IN_ORDER = ["sim:metal", "sim:opencl"]
ALL_SIMS = ["sim", "sim:cuda", "sim:opencl", "sim:metal", "local-task"]


def findings(trace, rules=None):
    return [(f.rule, f.ops, f.message) for f in check_trace(trace, rules).findings]


def _racing_threads_on_one_queue(dev, copy_delay, fill_delay):
    a, b = dev.allocator.allocate_buffer(256), dev.allocator.allocate_buffer(256)
    s, t = dev.create_semaphore(), dev.create_semaphore()

    def consumer():
        dev.sleep(copy_delay)
        dev.queue_copy([], [(t, 1)], a, 0, b, 0, 256)   # nothing orders it after the fill

    th = threading.Thread(target=consumer)
    th.start()
    dev.sleep(fill_delay)
    dev.queue_fill([], [(s, 1)], a, 0, 256, 4, 1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1), (t, 1)], WAIT)
    join(th)


@pytest.mark.parametrize("copy_delay, fill_delay, expected", [
    (1e-4, 0, ("hazard.raw", ["0:0.0", "1:0.0"], "copy 1:0.0 reads buffer b0[0:256) written by fill "
               "0:0.0 on queue 0 with no semaphore or barrier ordering them (RAW)")),
    (0, 1e-4, ("hazard.war", ["1:0.0", "0:0.0"], "fill 0:0.0 writes buffer b0[0:256) read by copy "
               "1:0.0 on queue 0 with no semaphore or barrier ordering them (WAR)"))])
@pytest.mark.parametrize("uri", IN_ORDER)
def test_unsynchronized_threads_sharing_an_in_order_queue_race(uri, copy_delay, fill_delay, expected):
    """Which thread reaches the queue first is timing: the queue's order is no guarantee."""
    with hal.create_device(uri) as dev:
        _racing_threads_on_one_queue(dev, copy_delay, fill_delay)
        assert findings(dev.trace) == [expected]


@pytest.mark.parametrize("uri", IN_ORDER)
def test_threads_ordered_by_a_hand_off_keep_the_queue_order(uri):
    """The same two threads, but the consumer submits after a hand-off from the fill's thread:
    the in-order queue orders the copy after the fill (clean)."""
    dev = hal.create_device(uri)
    a, b = dev.allocator.allocate_buffer(256), dev.allocator.allocate_buffer(256)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    go = threading.Event()

    def consumer():
        assert go.wait(WAIT)
        dev.queue_copy([], [(t, 1)], a, 0, b, 0, 256)

    th = threading.Thread(target=consumer)
    th.start()
    dev.queue_fill([], [(s, 1)], a, 0, 256, 4, 1)
    go.set()
    dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1), (t, 1)], WAIT)
    join(th)
    assert b.map_read(0, 4) == bytes([4]) * 4
    assert findings(dev.trace) == []
    dev.close()


@pytest.mark.parametrize("uri", ALL_SIMS)
def test_work_a_host_call_enqueues_is_after_its_waits(uri):
    dev = hal.create_device(uri)
    a, b = dev.allocator.allocate_buffer(256), dev.allocator.allocate_buffer(256)
    filled, copied, called = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(filled, 1)], a, 0, 256, 4, 1)

    def fn(args, ctx):
        ctx.device.queue_copy([], [(copied, 1)], a, 0, b, 0, 256)

    dev.queue_host_call([(filled, 1)], [(called, 1)], fn)
    dev.wait_semaphores(hal.WaitMode.ALL, [(copied, 1), (called, 1)], WAIT)
    assert b.map_read(0, 256) == bytes([4]) * 256
    ops = {e["op"]: e.get("call") for e in dev.trace.events("op")}
    assert ops == {"0:0": None, "0:1": None, "1:0": "0:1"}   # the copy, enqueued inside 0:1
    assert findings(dev.trace) == []
    dev.close()


@pytest.mark.parametrize("uri", ALL_SIMS)
def test_a_host_call_function_that_waits_then_reads_is_ordered_by_its_wait(uri):
    dev = hal.create_device(uri)
    a = dev.allocator.allocate_buffer(256)
    filled, called = dev.create_semaphore(), dev.create_semaphore()
    out = []

    def fn(args, ctx):
        filled.wait(1, WAIT)
        out.append(a.map_read(0, 4))

    dev.queue_fill([], [(filled, 1)], a, 0, 256, 4, 1)
    dev.queue_host_call([], [(called, 1)], fn)
    called.wait(1, WAIT)
    assert out == [bytes([4]) * 4]
    waits = [e.get("call") for e in dev.trace.events("host_wait")]
    assert waits == ["0:1", None]
    assert findings(dev.trace) == []
    dev.close()


def test_a_host_call_function_reading_without_waiting_still_races():
    dev = hal.create_device("sim")
    a = dev.allocator.allocate_buffer(256)
    filled, called = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(filled, 1)], a, 0, 256, 4, 1)
    dev.queue_host_call([], [(called, 1)], lambda args, ctx: a.map_read(0, 4) and None)
    called.wait(1, WAIT)
    filled.wait(1, WAIT)
    assert [f[0] for f in findings(dev.trace)] == ["hazard.raw"]
    dev.close()


@pytest.mark.parametrize("uri", ["sim", "sim:cuda", "sim:metal", "sim:opencl"])
def test_host_write_racing_a_transients_dealloca(uri):
    """The host's map_write and the dealloca are not ordered: on these runs the write came first
    (the sims are deterministic), on another the dealloca could free the storage under it."""
    dev = hal.create_device(uri)
    s, d, t = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    tmp = dev.queue_alloca([], [(s, 1)], 256, memory_type=hal.MemoryType.HOST_LOCAL | hal.MemoryType.DEVICE_VISIBLE,
                           usage=hal.BufferUsage.DEFAULT | hal.BufferUsage.MAPPING)
    s.wait(1, WAIT)
    dev.queue_barrier([], [(d, 1)])
    dev.queue_dealloca([(d, 1)], [(t, 1)], tmp)   # not ordered after the map_write below
    tmp.map_write(0, b"abc")
    t.wait(1, WAIT)
    assert findings(dev.trace) == [
        ("lifetime.dealloca_race", ["0:2"], "dealloca 0:2 of buffer b0 is not ordered after host thread 0's "
         "map_write of it: make the dealloca wait for a semaphore the host signals after the access")]
    dev.close()


def test_host_write_ordered_before_the_dealloca_is_clean():
    dev = hal.create_device("sim")
    s, h, t = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    tmp = dev.queue_alloca([], [(s, 1)], 256, memory_type=hal.MemoryType.HOST_LOCAL | hal.MemoryType.DEVICE_VISIBLE,
                           usage=hal.BufferUsage.DEFAULT | hal.BufferUsage.MAPPING)
    s.wait(1, WAIT)
    dev.queue_dealloca([(h, 1)], [(t, 1)], tmp)
    tmp.map_write(0, b"abc")
    h.signal(1)
    t.wait(1, WAIT)
    assert findings(dev.trace) == []
    dev.close()


@pytest.mark.parametrize("uri", IN_ORDER)
def test_queue_order_past_another_threads_unordered_op(uri):
    """Thread 0 fills then copies on one in-order queue; thread 1's barrier, unordered with both,
    lands between them on the queue. The copy is still after the fill (same thread, same queue):
    clean, though the barrier races with both (it touches nothing)."""
    dev = hal.create_device(uri)
    a, b = dev.allocator.allocate_buffer(256), dev.allocator.allocate_buffer(256)
    s, t, u = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()

    def other():
        dev.sleep(2e-6)
        dev.queue_barrier([], [(u, 1)])

    th = threading.Thread(target=other)
    th.start()
    dev.queue_fill([], [(s, 1)], a, 0, 256, 7, 1)
    dev.sleep(1e-5)
    dev.queue_copy([], [(t, 1)], a, 0, b, 0, 256)
    dev.wait_semaphores(hal.WaitMode.ALL, [(t, 1), (u, 1)], WAIT)
    join(th)
    queued = [e["op"] for e in dev.trace.events("op_done")]
    assert queued == ["0:0", "1:0", "0:1"]   # the barrier ran between them
    assert b.map_read(0, 4) == bytes([7]) * 4
    assert findings(dev.trace) == []
    dev.close()
