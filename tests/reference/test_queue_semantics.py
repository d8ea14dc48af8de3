"""Queue semantics of the reference drivers (HAL_SEMANTICS §A.4, §B.1, §B.2)."""

import threading

import pytest

from reference import hal
from tests.conftest import WAIT, join

S = hal.StatusCode


def code_of(fn, *args, **kwargs):
    with pytest.raises(hal.HalError) as ei:
        fn(*args, **kwargs)
    return ei.value


# -- local-task ------------------------------------------------------------------------------------

@pytest.fixture
def task():
    dev = hal.create_device("local-task")
    yield dev
    dev.close()


def test_no_head_of_line_blocking(task):
    blocked_gate, a, b = task.create_semaphore(), task.create_semaphore(), task.create_semaphore()
    task.queue_barrier([(blocked_gate, 1)], [(a, 1)])  # first in submission order, blocked
    task.queue_barrier([], [(b, 1)])  # ready: must not wait behind the blocked one
    b.wait(1, WAIT)
    assert a.query() == 0
    blocked_gate.signal(1)
    a.wait(1, WAIT)


def test_failure_propagates_code_and_message_through_a_chain(task):
    s0, s1, s2, s3 = (task.create_semaphore() for _ in range(4))
    buf = task.allocator.allocate_buffer(16)
    task.queue_fill([(s2, 1)], [(s3, 1)], buf, 0, 16, 0xFF, 1)
    task.queue_barrier([(s1, 1)], [(s2, 1)])
    task.queue_barrier([(s0, 1)], [(s1, 1)])
    s0.fail(S.DATA_LOSS, "device fault in stage 0")
    e = code_of(s3.wait, 1, WAIT)
    assert (e.code, e.message) == (S.DATA_LOSS, "device fault in stage 0")
    for s in (s1, s2, s3):
        assert s.payload == hal.SEMAPHORE_FAILURE_VALUE
        assert (s.failure.code, s.failure.message) == (S.DATA_LOSS, "device fault in stage 0")
    assert buf.map_read() == bytes(16)  # the failed op did not run
    done = [op for op in task.trace.operations() if op["kind"] == "fill"][0]
    assert done["status"] == int(S.DATA_LOSS)
    assert not [e for e in task.trace.events("cmd")]


def test_shutdown_cancels_pending_operations():
    dev = hal.create_device("local-task")
    gate, out = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(out, 1)])
    dev.close()
    assert (out.failure.code, out.failure.message) == (S.CANCELLED, "queue shutting down")


def test_a_refused_signal_fails_the_whole_signal_list(task):
    a, b, c = task.create_semaphore(5), task.create_semaphore(), task.create_semaphore()
    task.queue_barrier([], [(b, 1), (a, 3), (c, 1)])  # a is already past 3
    e = code_of(c.wait, 1, WAIT)
    assert e.code == S.INVALID_ARGUMENT and "already signaled past 3" in e.message
    # IREE list_fails the whole list once list_signal fails: b (already signaled) and a (refused) too
    for s in (a, b, c):
        assert (s.failure.code, s.failure.message) == (e.code, e.message)


def test_wait_before_signal_in_reverse_order(task):
    sems = [task.create_semaphore() for _ in range(6)]
    for i in range(5, 0, -1):
        task.queue_barrier([(sems[i - 1], 1)], [(sems[i], 1)])
    assert [s.query() for s in sems] == [0] * 6
    sems[0].signal(1)
    sems[5].wait(1, WAIT)
    assert [s.query() for s in sems] == [1] * 6


def test_execution_overlaps_on_workers(task):
    """Two host calls can run at once on different workers (the queue is not serialized)."""
    both_inside = threading.Barrier(2, timeout=WAIT)
    done = task.create_semaphore()

    def meet(args, ctx):
        both_inside.wait()

    task.queue_host_call([], [(done, 1)], meet)
    task.queue_host_call([], [], meet)
    done.wait(1, WAIT)


# -- local-sync ------------------------------------------------------------------------------------

@pytest.fixture
def sync():
    dev = hal.create_device("local-sync")
    yield dev
    dev.close()


def test_sync_failed_wait_returns_synchronously_and_signals_nothing(sync):
    w, g = sync.create_semaphore(), sync.create_semaphore()
    w.fail(S.CANCELLED, "upstream")
    e = code_of(sync.queue_barrier, [(w, 1)], [(g, 1)])
    assert (e.code, e.message) == (S.CANCELLED, "upstream")
    assert g.query() == 0 and g.failure is None


def test_sync_queue_call_blocks_until_another_thread_signals(sync):
    w, g = sync.create_semaphore(), sync.create_semaphore()
    t = threading.Thread(target=lambda: (sync.sleep(0.05), w.signal(1)))
    t.start()
    sync.queue_barrier([(w, 1)], [(g, 1)])  # blocks until the thread signals
    assert g.query() == 1
    join(t)


def test_sync_body_error_fails_signals_and_raises(sync):
    g = sync.create_semaphore()
    t = sync.queue_alloca([], [], 64)
    sync.queue_dealloca([], [], t)
    e = code_of(sync.queue_fill, [], [(g, 1)], t, 0, 64, 0, 1)
    assert e.code == S.FAILED_PRECONDITION and "after queue_dealloca" in e.message
    assert g.failure.code == S.FAILED_PRECONDITION


# -- both ------------------------------------------------------------------------------------------

def test_use_after_dealloca_fails_the_signal(ref_device):
    dev = ref_device
    a, d, f = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    t = dev.queue_alloca([], [(a, 1)], 256)
    assert t.placement.flags & hal.BufferPlacementFlags.ASYNCHRONOUS and t.byte_length == 256
    dev.queue_dealloca([(a, 1)], [(d, 1)], t)
    d.wait(1, WAIT)
    try:
        dev.queue_fill([], [(f, 1)], t, 0, 256, 0xAB, 1)
    except hal.HalError as e:  # local-sync returns the body's error too
        assert e.code == S.FAILED_PRECONDITION
    assert code_of(f.wait, 1, WAIT).code == S.FAILED_PRECONDITION


def test_dealloca_of_regular_buffer_is_a_barrier(ref_device):
    buf = ref_device.allocator.allocate_buffer(8)
    s = ref_device.create_semaphore()
    ref_device.queue_dealloca([], [(s, 1)], buf)
    s.wait(1, WAIT)
    buf.map_fill(0, 8, 1, 1)
    assert buf.map_read() == b"\x01" * 8


@pytest.mark.parametrize("result,expect", [
    (None, None),
    (hal.StatusCode.OK, None),
    (hal.HalError(S.PERMISSION_DENIED, "test error from callback"), (S.PERMISSION_DENIED, "test error from callback")),
    (hal.StatusCode.UNAVAILABLE, (S.UNAVAILABLE, "host call returned UNAVAILABLE")),
    ("junk", (S.INTERNAL, "host call returned 'junk'; expected None, a StatusCode or a HalError")),
])
def test_host_call_results(ref_device, result, expect):
    g1, g2 = ref_device.create_semaphore(), ref_device.create_semaphore()
    seen = []

    def fn(args, ctx):
        seen.append((args, ctx.device is ref_device, [(s.id, v) for s, v in ctx.signal]))
        if isinstance(result, hal.HalError):
            raise result
        return result

    ref_device.queue_host_call([], [(g1, 1), (g2, 2)], fn, args=(10, 20, 30, 2**64 - 1))
    if expect is None:
        ref_device.wait_semaphores(hal.WaitMode.ALL, [(g1, 1), (g2, 2)], WAIT)
    else:
        e = code_of(ref_device.wait_semaphores, hal.WaitMode.ALL, [(g1, 1), (g2, 2)], WAIT)
        assert (e.code, e.message) == expect
        assert (g2.failure.code, g2.failure.message) == expect
    assert seen == [((10, 20, 30, 2**64 - 1), True, [(g1.id, 1), (g2.id, 2)])]


def test_host_call_raising_python_exception_fails_internal(ref_device):
    g = ref_device.create_semaphore()
    ref_device.queue_host_call([], [(g, 1)], lambda a, c: 1 / 0)
    e = code_of(g.wait, 1, WAIT)
    assert e.code == S.INTERNAL and "ZeroDivisionError" in e.message


def test_host_call_deferred_and_non_blocking(ref_device):
    g, side = ref_device.create_semaphore(), ref_device.create_semaphore()
    held, called = [], threading.Event()

    def deferred(args, ctx):
        held.append(ctx.signal)
        called.set()
        return hal.StatusCode.DEFERRED

    ref_device.queue_host_call([], [(g, 1)], deferred)
    assert called.wait(WAIT)
    ref_device.sleep(0.01)
    assert g.query() == 0  # the callback owns signalling now
    (sem, value), = held[0]
    sem.signal(value)
    g.wait(1, WAIT)
    got = []
    ref_device.queue_host_call([], [(g, 2)], lambda a, c: (got.append(c.signal), side.signal(1), 1 / 0),
                               non_blocking=True)
    ref_device.wait_semaphores(hal.WaitMode.ALL, [(g, 2), (side, 1)], WAIT)
    assert got == [()] and g.failure is None  # signalled before the call; its error ignored


def test_queue_update_splits_large_payloads_and_captures_source(ref_device):
    n = 2 * 64 * 1024 + 37
    src = bytearray((i * 7) & 0xFF for i in range(n + 11))
    buf = ref_device.allocator.allocate_buffer(n + 20)
    g = ref_device.create_semaphore()
    ref_device.queue_update([], [(g, 1)], src, 11, buf, 13, n)
    src[:] = b"\xee" * len(src)
    g.wait(1, WAIT)
    expected = bytes((i * 7) & 0xFF for i in range(n + 11))[11:]
    assert buf.map_read(13, n) == expected and buf.map_read(0, 13) == bytes(13)
    cmds = [e for e in ref_device.trace.events("cmd")]
    assert [(c["kind"], c["access"][0][1:3]) for c in cmds] == [
        ("update", [13, 65536]), ("update", [13 + 65536, 65536]), ("update", [13 + 131072, 37])]


def test_binding_table_is_copied_and_resources_retained():
    dev = hal.create_device("local-task")
    try:
        w, g = dev.create_semaphore(), dev.create_semaphore()
        src = dev.allocator.allocate_buffer(256)
        src.map_write(0, bytes(i ^ 0x5A for i in range(256)))
        dst = dev.allocator.allocate_buffer(256)
        cb = dev.create_command_buffer(binding_capacity=2, categories=hal.CommandCategory.TRANSFER)
        cb.begin()
        cb.copy_buffer(hal.BufferRef(slot=0, length=256), hal.BufferRef(slot=1, length=256))
        cb.end()
        table = [src, dst]
        dev.queue_execute([(w, 1)], [(g, 1)], cb, table)
        src_id, cb_id = src.id, cb.id
        del cb, src
        table.clear()
        released = {e["res"] for e in dev.trace.events("host_release")}
        assert src_id not in released and cb_id not in released  # the queue still holds them
        w.signal(1)
        g.wait(1, WAIT)
        assert dst.map_read() == bytes(i ^ 0x5A for i in range(256))
        op = [o for o in dev.trace.operations() if o["kind"] == "execute"][0]
        retained = [e for e in dev.trace.events("retain") if e["op"] == op["op"]][0]["res"]
        assert set(retained) >= {cb_id, src_id, dst.id, w.id, g.id}
        release = [e for e in dev.trace.events("release") if e["op"] == op["op"]]
        assert len(release) == 1 and set(release[0]["res"]) == set(retained)
    finally:
        dev.close()
