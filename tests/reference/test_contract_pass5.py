"""Contract differences against IREE found by the fifth adversarial pass (differential runs against
``iree.runtime`` 3.13 local-task and IREE's sources)."""

import pytest

from reference import hal

S = hal.StatusCode
MT, BU, BC = hal.MemoryType, hal.BufferUsage, hal.BufferCompatibility
WAIT = 10.0


# -- usage 0 means DEFAULT (iree_hal_buffer_params_canonicalize) ---------------------------------------

def test_query_compatibility_with_usage_zero_is_that_of_the_default_usage(dev):
    # IREE local-task: query_buffer_compatibility(DEVICE_LOCAL, usage 0) == 3079 (queue transfer + dispatch)
    compat, size = dev.allocator.query_buffer_compatibility(16, MT.DEVICE_LOCAL, 0)
    assert int(compat) == int(BC.ALLOCATABLE | BC.IMPORTABLE | BC.EXPORTABLE | BC.QUEUE_TRANSFER | BC.QUEUE_DISPATCH)
    assert size == 16


def test_allocate_buffer_with_usage_zero_gets_the_default_usage(dev):
    buf = dev.allocator.allocate_buffer(16, MT.DEVICE_LOCAL | MT.HOST_VISIBLE, 0)
    assert (buf.allowed_usage & BU.DEFAULT) == BU.DEFAULT
    assert buf.compatibility & BC.QUEUE_DISPATCH
    # so it can be dispatched on, as on IREE
    exe = dev.load_executable()
    done = dev.create_semaphore()
    buf.map_write(0, (1).to_bytes(4, "little") * 4)
    out = dev.allocator.allocate_buffer(16, MT.DEVICE_LOCAL | MT.HOST_VISIBLE, 0)
    dev.queue_dispatch([], [(done, 1)], exe, "scale_and_offset", (1, 1, 1), [3, 10], [buf, out])
    done.wait(1, WAIT)
    assert out.map_read() == (13).to_bytes(4, "little") * 4


def test_queue_alloca_with_usage_zero_gets_the_default_usage(dev):
    done = dev.create_semaphore()
    buf = dev.queue_alloca([], [(done, 1)], 64, MT.OPTIMAL_FOR_DEVICE, 0)
    assert (buf.allowed_usage & BU.DEFAULT) == BU.DEFAULT
    done.wait(1, WAIT)


def test_allocate_buffer_keeps_memory_type_bits_it_does_not_name(dev):
    # IREE's heap allocator only adds HOST_VISIBLE and clears OPTIMAL: 0x80 | DEVICE_LOCAL -> 0xb2
    buf = dev.allocator.allocate_buffer(16, int(MT.DEVICE_LOCAL) | (1 << 7) | int(MT.OPTIMAL), BU.DEFAULT)
    assert int(buf.memory_type) == 0xB2


# -- cancelled timepoints do not pile up -----------------------------------------------------------------

def test_timed_out_waits_leave_no_timepoints_behind(dev):
    s = dev.create_semaphore()
    for _ in range(500):
        with pytest.raises(hal.HalError) as ei:
            s.wait(1, timeout=1e-6)
        assert ei.value.code == S.DEADLINE_EXCEEDED
    assert len(s._timepoints) <= 64  # IREE unlinks a cancelled timepoint; here it is compacted away
    s.signal(1)
    s.wait(1, WAIT)  # still usable: the live timepoints survived the compaction
    assert s.query() == 1


def test_compaction_keeps_live_timepoints(async_dev):
    gate, outs = async_dev.create_semaphore(), []
    for i in range(5):  # ops waiting on gate: their timepoints must survive the waits' compaction
        out = async_dev.create_semaphore()
        async_dev.queue_barrier([(gate, 1 + i)], [(out, 1)])
        outs.append(out)
    for _ in range(200):
        with pytest.raises(hal.HalError):
            gate.wait(100, timeout=1e-6)
    gate.signal(5)
    async_dev.wait_semaphores(hal.WaitMode.ALL, [(o, 1) for o in outs], WAIT)
    assert [o.query() for o in outs] == [1] * 5


# -- queries made by host calls are not remembered forever -------------------------------------------------

def test_host_call_queries_do_not_grow_the_semaphore_without_bound(dev):
    if "host_calls" not in dev.capabilities:
        pytest.skip("no host calls")
    s, done = dev.create_semaphore(1), dev.create_semaphore()
    s.signal(2)
    seen = []
    for i in range(300):
        dev.queue_host_call([(done, i)], [(done, i + 1)], lambda args, ctx: seen.append(s.query()))
    done.wait(300, WAIT)
    assert seen == [2] * 300
    assert len(s._queried) <= 64
    # each host call's query of the new value is still traced (the checks order the call after it)
    assert len([e for e in dev.trace.events("host_query") if e.get("op")]) == 300


@pytest.mark.parametrize("uri", ["local-task", "local-sync"])  # (a sim reports the wait as a deadlock)
def test_a_dropped_semaphore_with_a_timed_out_wait_is_freed_at_once(uri, no_gc):
    """A cancelled timepoint stays in the heap until compaction; it must not point back at its
    semaphore (a cycle: the host's drop would be traced only when the cyclic collector runs)."""
    import weakref

    with hal.create_device(uri) as dev:
        s = dev.create_semaphore()
        with pytest.raises(hal.HalError):
            s.wait(1, timeout=1e-6)
        gone = weakref.ref(s)
        sid = s.id
        del s
        assert gone() is None
        assert sid in [e["res"] for e in dev.trace.events("host_release")]


def test_local_task_idle_workers_do_not_keep_their_last_op():
    import gc
    import time
    import weakref

    dev = hal.create_device("local-task")
    s = dev.create_semaphore()
    refs = []
    for i in range(12):
        b = dev.allocator.allocate_buffer(64)
        dev.queue_fill([], [(s, i + 1)], b, 0, 64, 1, 1)
        refs.append(weakref.ref(b))
        del b
        s.wait(i + 1, timeout=5)
    deadline = time.monotonic() + 2  # (a worker drops it just after signaling)
    while any(r() is not None for r in refs) and time.monotonic() < deadline:
        time.sleep(0.01)
        gc.collect()
    assert [r() for r in refs] == [None] * 12
    dev.close()
