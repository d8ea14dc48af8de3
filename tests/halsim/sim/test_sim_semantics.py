"""Queue semantics, side by side with the reference drivers (the ideas of tests/reference/
test_queue_semantics.py, parametrized over local-task / local-sync and the matching sim personality)."""

import pytest

from halsim.sim.driver import driver
from reference import hal
from tests.conftest import WAIT

S = hal.StatusCode
ASYNC = ["local-task", "sim"]
SYNC = ["local-sync", "sim:sync"]


def create(uri: str):
    if uri.startswith("sim"):
        _, path, options = hal.parse_uri(uri)
        return driver.create_device(path, **options)
    return hal.create_device(uri)


@pytest.fixture
def open_device():
    devices = []

    def make(uri):
        devices.append(create(uri))
        return devices[-1]

    yield make
    for d in devices:
        d.close()


def error_of(fn, *args, **kwargs) -> hal.HalError:
    with pytest.raises(hal.HalError) as ei:
        fn(*args, **kwargs)
    return ei.value


@pytest.mark.parametrize("uri", ASYNC)
def test_no_head_of_line_blocking(open_device, uri):
    dev = open_device(uri)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(a, 1)])
    dev.queue_barrier([], [(b, 1)])
    b.wait(1, WAIT)
    assert a.query() == 0
    gate.signal(1)
    a.wait(1, WAIT)


@pytest.mark.parametrize("uri", ASYNC)
def test_failure_propagates_code_and_message_through_a_chain(open_device, uri):
    dev = open_device(uri)
    s0, s1, s2, s3 = (dev.create_semaphore() for _ in range(4))
    buf = dev.allocator.allocate_buffer(16)
    dev.queue_fill([(s2, 1)], [(s3, 1)], buf, 0, 16, 0xFF, 1)
    dev.queue_barrier([(s1, 1)], [(s2, 1)])
    dev.queue_barrier([(s0, 1)], [(s1, 1)])
    s0.fail(S.DATA_LOSS, "device fault in stage 0")
    e = error_of(s3.wait, 1, WAIT)
    assert (e.code, e.message) == (S.DATA_LOSS, "device fault in stage 0")
    for s in (s1, s2, s3):
        assert (s.failure.code, s.failure.message) == (S.DATA_LOSS, "device fault in stage 0")
    assert buf.map_read() == bytes(16)
    fill = [op for op in dev.trace.operations() if op["kind"] == "fill"][0]
    assert fill["status"] == int(S.DATA_LOSS)
    assert not list(dev.trace.events("cmd"))


@pytest.mark.parametrize("uri", ASYNC + SYNC)
def test_a_refused_signal_fails_the_whole_signal_list(open_device, uri):
    dev = open_device(uri)
    a, b, c = dev.create_semaphore(5), dev.create_semaphore(), dev.create_semaphore()
    if uri in SYNC:  # local-sync returns the refused signal's error from the call ([H] queue_op_end)
        call = error_of(dev.queue_barrier, [], [(b, 1), (a, 3), (c, 1)])
        e = error_of(c.wait, 1, WAIT)
        assert (call.code, call.message) == (e.code, e.message)
    else:
        dev.queue_barrier([], [(b, 1), (a, 3), (c, 1)])
        e = error_of(c.wait, 1, WAIT)
    assert e.code == S.INVALID_ARGUMENT and "already signaled past 3" in e.message
    # IREE list_fails the whole list once list_signal fails: b (already signaled) and a (refused) too
    for s in (a, b, c):
        assert (s.failure.code, s.failure.message) == (e.code, e.message)


@pytest.mark.parametrize("uri", ASYNC)
def test_wait_before_signal_in_reverse_order(open_device, uri):
    dev = open_device(uri)
    sems = [dev.create_semaphore() for _ in range(6)]
    for i in range(5, 0, -1):
        dev.queue_barrier([(sems[i - 1], 1)], [(sems[i], 1)])
    assert [s.query() for s in sems] == [0] * 6
    sems[0].signal(1)
    sems[5].wait(1, WAIT)
    assert [s.query() for s in sems] == [1] * 6


@pytest.mark.parametrize("uri", SYNC)
def test_sync_failed_wait_returns_synchronously_and_signals_nothing(open_device, uri):
    dev = open_device(uri)
    w, g = dev.create_semaphore(), dev.create_semaphore()
    w.fail(S.CANCELLED, "upstream")
    e = error_of(dev.queue_barrier, [(w, 1)], [(g, 1)])
    assert (e.code, e.message) == (S.CANCELLED, "upstream")
    assert g.query() == 0 and g.failure is None
    assert not list(dev.trace.events("fail"))[1:]  # only w's own failure


@pytest.mark.parametrize("uri", ASYNC + SYNC)
def test_host_call_error_fails_the_signals(open_device, uri):
    dev = open_device(uri)
    g1, g2 = dev.create_semaphore(), dev.create_semaphore()

    def fn(args, ctx):
        assert args == (1, 2) and [s for s, _ in ctx.signal] == [g1, g2]
        raise hal.HalError(S.PERMISSION_DENIED, "test error from callback")

    dev.queue_host_call([], [(g1, 1), (g2, 2)], fn, (1, 2))  # the call itself succeeds
    for g in (g1, g2):
        e = error_of(g.wait, 1, WAIT)
        assert (e.code, e.message) == (S.PERMISSION_DENIED, "test error from callback")


@pytest.mark.parametrize("uri", ASYNC + SYNC)
def test_non_blocking_host_call_signals_first(open_device, uri):
    dev = open_device(uri)
    g = dev.create_semaphore()
    seen = []
    dev.queue_host_call([], [(g, 1)], lambda args, ctx: seen.append((g.query(), ctx.signal)), non_blocking=True)
    g.wait(1, WAIT)
    assert seen == [(1, ())]


@pytest.mark.parametrize("uri", ASYNC + SYNC)
def test_use_after_dealloca_fails(open_device, uri):
    dev = open_device(uri)
    s = dev.create_semaphore()
    buf = dev.queue_alloca([], [(s, 1)], 16)
    dev.queue_fill([(s, 1)], [(s, 2)], buf, 0, 16, 3, 1)
    dev.queue_dealloca([(s, 2)], [(s, 3)], buf)
    s.wait(3, WAIT)
    g = dev.create_semaphore()
    if uri in SYNC:  # the body's failure is raised by the queue call, and fails the signals
        e = error_of(dev.queue_fill, [], [(g, 1)], buf, 0, 16, 4, 1)
    else:
        dev.queue_fill([], [(g, 1)], buf, 0, 16, 4, 1)
        e = error_of(g.wait, 1, WAIT)
    assert e.code == S.FAILED_PRECONDITION and "after queue_dealloca" in e.message
    assert g.failure is not None
    (failed_cmd,) = [c for c in dev.trace.events("cmd") if c.get("status")]
    assert failed_cmd["status"] == int(S.FAILED_PRECONDITION)


def _program(dev):
    """A single-thread program whose operations and results do not depend on timing."""
    exe = dev.load_executable()
    a, b, c = (dev.allocator.allocate_buffer(32) for _ in range(3))
    s = [dev.create_semaphore() for _ in range(5)]
    dev.queue_update([], [(s[0], 1)], bytes(range(32)), 0, a, 0, 32)
    cb = dev.create_command_buffer(mode=hal.CommandBufferMode.DEFAULT, binding_capacity=2)
    cb.begin()
    cb.dispatch(exe, "scale_and_offset", (2, 1, 1), (3, -1), (hal.BufferRef(slot=0), hal.BufferRef(slot=1)))
    cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.DISPATCH)
    cb.dispatch(exe, "negate", (1, 1, 1), (), (hal.BufferRef(slot=1), hal.BufferRef(slot=0)))
    cb.end()
    dev.queue_execute([(s[0], 1)], [(s[1], 1)], cb, [a, b])
    dev.queue_execute([(s[1], 1)], [(s[2], 1)], cb, [b, c])  # reusable: a second submission
    dev.queue_copy([(s[2], 1)], [(s[3], 1)], c, 0, a, 0, 16)
    dev.queue_host_call([(s[3], 1)], [(s[4], 1)], lambda args, ctx: None)
    s[4].wait(1, WAIT)
    return [x.map_read() for x in (a, b, c)], [x.query() for x in s]


@pytest.mark.parametrize("ref, sim", [("local-task", "sim"), ("local-sync", "sim:sync")])
def test_same_operations_commands_and_results_as_the_reference(open_device, ref, sim):
    r, m = open_device(ref), open_device(sim)
    assert _program(r) == _program(m)

    def shape(dev):
        ops = [(o["op"], o["kind"], o["wait"], o["signal"], o["status"]) for o in dev.trace.operations()]
        cmds = sorted((c["op"], c["index"], c["kind"], c["access"]) for c in dev.trace.events("cmd"))
        sigs = sorted((e["sem"], e["value"], e["cause"]) for e in dev.trace.events("signal"))
        return ops, cmds, sigs

    assert shape(r) == shape(m)
