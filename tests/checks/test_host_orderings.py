"""Orderings the host program makes that the checks must see (and the races they must still find):
Thread.start, a host call that returns DEFERRED and signals later, Semaphore.query polling, which
timepoint an ANY wait credits, host signals the HAL refused, and deadlines that a program recovered
from. Each program runs on real devices (local-task's threads, the simulators) and is checked."""

import queue
import threading

import pytest

from halsim.checks import check_trace
from reference import hal
from reference.trace import Trace
from tests.conftest import WAIT, join
from tests.checks.barrier_programs import findings

T = WAIT
DEVICES = ["local-task", "sim", "sim:cuda"]



def run(uri: str, program) -> Trace:
    dev = hal.create_device(uri)
    try:
        program(dev)
    finally:
        dev.close()
    return dev.trace


# -- Thread.start ------------------------------------------------------------------------------------

def _start(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    join(t)


def write_then_start_a_copier(dev):
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    dev.create_semaphore()                              # main is host thread 0
    a.map_write(0, bytes(range(16)))

    def worker():
        s = dev.create_semaphore()
        dev.queue_copy([], [(s, 1)], a, 0, b, 0, 16)   # reads a: after the write (Thread.start)
        s.wait(1, T)
    _start(worker)
    assert b.map_read() == bytes(range(16))


def fill_wait_then_start_a_copier(dev):
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    s0 = dev.create_semaphore()
    dev.queue_fill([], [(s0, 1)], a, 0, 16, 7, 1)
    s0.wait(1, T)

    def worker():
        s = dev.create_semaphore()
        dev.queue_copy([], [(s, 1)], a, 0, b, 0, 16)
        s.wait(1, T)
    _start(worker)
    assert b.map_read() == bytes([7]) * 16


@pytest.mark.parametrize("uri", DEVICES)
def test_thread_start_orders_what_the_parent_did_before_the_child(uri):
    trace = run(uri, write_then_start_a_copier)
    assert findings(trace) == []
    assert [(e["thread"], e["role"], e["sync"], e["via"]) for e in trace.events("host_sync")] == [
        (0, "release", 0, "Thread.start"), (1, "acquire", 0, "Thread.start")]
    assert findings(run(uri, fill_wait_then_start_a_copier)) == []


def test_a_write_after_thread_start_still_races_with_the_child():
    def program(dev):
        a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
        dev.create_semaphore()
        ready = threading.Semaphore(0)                  # (invisible to the trace)

        def worker():
            s = dev.create_semaphore()
            assert ready.acquire(timeout=T)
            dev.queue_copy([], [(s, 1)], a, 0, b, 0, 16)
            s.wait(1, T)
        t = threading.Thread(target=worker)
        t.start()
        a.map_write(0, bytes(range(16)))                # after the start: not ordered before the copy
        ready.release()
        join(t)

    assert findings(run("sim", program)) == [
        ("hazard.raw", ["host:0", "1:0.0"], "copy 1:0.0 reads buffer b0[0:16) written by map_write by host "
         "thread 0 with no semaphore wait ordering them (RAW)")]


# -- a host call that returns DEFERRED -----------------------------------------------------------------

def deferred_signal_from_a_thread(dev):
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    threads = []

    def fn(args, ctx):
        a.map_write(0, bytes(range(16)))
        sig = list(ctx.signal)
        th = threading.Thread(target=lambda: [sem.signal(v) for sem, v in sig])
        th.start()
        threads.append(th)
        return hal.StatusCode.DEFERRED
    dev.queue_host_call([], [(s, 1)], fn)
    dev.queue_copy([(s, 1)], [(t, 1)], a, 0, b, 0, 16)
    t.wait(1, T)
    for th in threads:
        join(th)
    assert b.map_read() == bytes(range(16))


def deferred_signal_inline(dev):
    a, b = dev.allocator.allocate_buffer(16), dev.allocator.allocate_buffer(16)
    s, t = dev.create_semaphore(), dev.create_semaphore()

    def fn(args, ctx):
        a.map_write(0, bytes(range(16)))
        for sem, v in ctx.signal:
            sem.signal(v)
        return hal.StatusCode.DEFERRED
    dev.queue_host_call([], [(s, 1)], fn)
    dev.queue_copy([(s, 1)], [(t, 1)], a, 0, b, 0, 16)
    t.wait(1, T)
    assert b.map_read() == bytes(range(16))


@pytest.mark.parametrize("uri", DEVICES)
def test_a_deferred_host_call_that_hands_its_signals_to_a_thread_is_clean(uri):
    """HAL Q12: the function took over signalling; its thread signals after the function's write
    (Thread.start from inside the function is the host call's release), and the op signals nothing."""
    trace = run(uri, deferred_signal_from_a_thread)
    assert findings(trace) == []
    assert [(e["thread"], e.get("op"), e["role"], e["via"]) for e in trace.events("host_sync")] == [
        (None, "0:0", "release", "Thread.start"), (1, None, "acquire", "Thread.start")]


@pytest.mark.parametrize("uri", ["sim", "local-task", "local-sync"])
def test_a_deferred_host_call_signalling_inline_is_clean(uri):
    trace = run(uri, deferred_signal_inline)
    assert findings(trace) == []
    # the function's own signal is the op's (as on the simulator), not its worker thread's
    assert [e["cause"] for e in trace.events("signal")][:1] == ["0:0"]


def test_a_host_call_that_signals_itself_still_races_with_an_unordered_signal():
    def program(dev):
        s = dev.create_semaphore()
        dev.queue_host_call([], [(s, 1)], lambda args, ctx: None, queue_affinity=1)
        dev.queue_barrier([], [(s, 2)], queue_affinity=2)
        dev.wait_semaphores(hal.WaitMode.ALL, [(s, 2)], T)

    assert findings(run("sim?queues=2", program)) == [
        ("semaphore.racing_signals", ["0:0", "0:1"], "host_call 0:0 signals s0=1 and barrier 0:1 signals "
         "s0=2 with nothing ordering them: the final value depends on timing")]


# -- Semaphore.query -----------------------------------------------------------------------------------

def poll_then_read(dev):
    a = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], a, 0, 16, 7, 1)
    for _ in range(100_000):
        if s.query() >= 1:
            break
        dev.sleep(1e-6)
    for _ in range(5):
        assert s.query() == 1                           # the same value again: not traced again
    assert a.map_read() == bytes([7]) * 16


@pytest.mark.parametrize("uri", DEVICES)
def test_a_query_that_saw_the_value_orders_the_read_after_the_signal(uri):
    trace = run(uri, poll_then_read)
    assert findings(trace) == []
    assert [(e["thread"], e["sem"], e["value"]) for e in trace.events("host_query")] == [(0, "s0", 1)]


def test_a_query_that_saw_the_old_value_orders_nothing():
    def program(dev):
        a = dev.allocator.allocate_buffer(1 << 20)
        s = dev.create_semaphore()
        dev.queue_fill([], [(s, 1)], a, 0, 1 << 20, 7, 1)
        assert s.query() == 0                            # (virtual time: the fill has not run)
        a.map_read(0, 16)
        s.wait(1, T)

    trace = run("sim", program)
    assert list(trace.events("host_query")) == []
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "host:0"], "map_read by host thread 0 reads buffer b0[0:16) written by fill "
         "0:0.0 with no semaphore wait ordering them (RAW)")]


# -- wait_semaphores(ANY) -------------------------------------------------------------------------------

def any_wait_then_read_the_slow_ones_output(first, second):
    def program(dev):
        x, y = dev.allocator.allocate_buffer(64), dev.allocator.allocate_buffer(1 << 16)
        s, t = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([], [(s, 1)], x, 0, 64, 1, 1, queue_affinity=1)           # fast: wakes the host
        dev.queue_fill([], [(t, 1)], y, 0, 1 << 14, 2, 1, queue_affinity=2)      # slower
        sems = {"s": s, "t": t}
        dev.wait_semaphores(hal.WaitMode.ANY, [(sems[first], 1), (sems[second], 1)], T)
        y.map_read(0, 16)                               # only s >= 1 is guaranteed here
        dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1), (t, 1)], T)
    return program


@pytest.mark.parametrize("order", [("t", "s"), ("s", "t")])
def test_an_any_wait_credits_the_timepoint_satisfied_first_not_the_first_listed(order):
    trace = run("sim?queues=2", any_wait_then_read_the_slow_ones_output(*order))
    assert findings(trace) == [
        ("hazard.raw", ["0:1.0", "host:0"], "map_read by host thread 0 reads buffer b1[0:16) written by fill "
         "0:1.0 with no semaphore wait ordering them (RAW)")]


def _synthetic(events) -> Trace:
    t = Trace({"device": "sim", "personality": "generic"})
    for e in events:
        t.emit(e)
    return t


def test_an_any_wait_met_at_once_by_an_initial_value_orders_nothing():
    """s1 starts at 1: the wait returned at once, whatever the fill's signal of s0 came before it."""
    trace = _synthetic([
        {"ev": "semaphore", "t": 0, "sem": "s0", "initial": 0, "thread": 0},
        {"ev": "semaphore", "t": 0, "sem": "s1", "initial": 1, "thread": 0},
        {"ev": "buffer", "t": 0, "buf": "b0", "size": 16},
        {"ev": "op", "t": 1, "op": "0:0", "kind": "fill", "thread": 0, "queue": 0, "wait": [], "signal": [["s0", 1]]},
        {"ev": "cmd", "t": 2, "op": "0:0", "index": 0, "kind": "fill", "start": 1, "track": 0,
         "access": [["b0", 0, 16, "w"]]},
        {"ev": "op_done", "t": 2, "op": "0:0", "status": 0},
        {"ev": "signal", "t": 2, "sem": "s0", "value": 1, "cause": "0:0"},
        {"ev": "host_wait", "t": 3, "thread": 0, "mode": "any", "wait": [["s0", 1], ["s1", 1]], "start": 1,
         "status": 0},
        {"ev": "host_read", "t": 4, "buf": "b0", "offset": 0, "length": 16, "digest": "0", "thread": 0}])
    assert findings(trace) == [
        ("hazard.raw", ["0:0.0", "host:0"], "map_read by host thread 0 reads buffer b0[0:16) written by fill "
         "0:0.0 with no semaphore wait ordering them (RAW)")]


# -- host signals the HAL refused ----------------------------------------------------------------------

@pytest.mark.parametrize("uri", DEVICES)
def test_a_host_signal_racing_an_op_signal_is_reported_whichever_won(uri):
    def program(dev):
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 2)])
        try:
            s.signal(1)                                 # refused if the barrier signaled 2 first
        except hal.HalError as e:
            assert e.code == hal.StatusCode.INVALID_ARGUMENT
        s.wait(2, T)

    assert findings(run(uri, program)) == [
        ("semaphore.racing_signals", ["0:0"], "host thread 0 signals s0=1 and barrier 0:0 signals s0=2 with "
         "nothing ordering them: the final value depends on timing")]


@pytest.mark.parametrize("uri", DEVICES)
def test_a_refused_host_signal_is_traced_and_reported_non_monotonic(uri):
    def program(dev):
        s = dev.create_semaphore()
        s.signal(2)
        with pytest.raises(hal.HalError) as err:
            s.signal(2)
        assert err.value.code == hal.StatusCode.INVALID_ARGUMENT

    trace = run(uri, program)
    (ev,) = trace.events("signal_rejected")
    assert {k: ev[k] for k in ("sem", "value", "status", "thread")} == {"sem": "s0", "value": 2, "status": 3,
                                                                        "thread": 0}
    assert [(e["value"], e["cause"]) for e in trace.events("signal")] == [(2, "host:0")]
    assert findings(trace) == [
        ("semaphore.non_monotonic", [], "host thread 0 signals s0=2 after host thread 0 signaled s0=2: "
         "timeline values must increase")]


def test_non_monotonic_names_the_earlier_signal_first():
    def program(dev):
        s, t = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([], [(s, 5)])
        dev.queue_barrier([(s, 5)], [(s, 3), (t, 1)])
        with pytest.raises(hal.HalError):
            t.wait(1, T)

    assert findings(run("sim", program)) == [
        ("semaphore.non_monotonic", ["0:0", "0:1"], "barrier 0:1 signals s0=3 after barrier 0:0 signaled s0=5: "
         "timeline values must increase")]


# -- deadlines a program recovered from, and one it did not ----------------------------------------------

def poll_then_signal(dev):
    s, t = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(s, 1)], [(t, 1)])
    with pytest.raises(hal.HalError) as err:
        t.wait(1, timeout=0.01)                         # not ready yet
    assert err.value.code == hal.StatusCode.DEADLINE_EXCEEDED
    s.signal(1)
    t.wait(1, timeout=T)


def poll_host_only(dev):
    s = dev.create_semaphore()
    with pytest.raises(hal.HalError) as err:
        s.wait(1, timeout=0.01)
    assert err.value.code == hal.StatusCode.DEADLINE_EXCEEDED
    s.signal(1)
    s.wait(1, timeout=T)


@pytest.mark.parametrize("uri", ["sim?queues=2", "sim:cuda?queues=2", "local-task"])
@pytest.mark.parametrize("program", [poll_then_signal, poll_host_only])
def test_a_deadline_the_program_recovered_from_is_no_deadlock(uri, program):
    assert findings(run(uri, program)) == []


@pytest.mark.parametrize("uri", ["local-task", "sim"])
def test_a_deadline_for_a_value_nothing_signals_is_a_host_wait_deadlock(uri):
    def program(dev):
        s, t = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([], [(s, 1)])
        with pytest.raises(hal.HalError) as err:
            t.wait(1, timeout=0.05)
        assert err.value.code == hal.StatusCode.DEADLINE_EXCEEDED

    assert findings(run(uri, program)) == [
        ("deadlock.host_wait", [], "host thread 0 waits for s1>=1 but no operation signals s1 to >= 1 and no "
         "other host thread did")]


def unenrolled_consumer(dev):
    """The consumer's first device use is reading the buffer, after a hand-off but with no wait."""
    buf = dev.allocator.allocate_buffer(64)
    handoff = queue.Queue()

    def producer():
        s = dev.create_semaphore()
        dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)
        handoff.put(s)

    def consumer():
        handoff.get(timeout=T)
        buf.map_read()          # forgot s.wait(1): races with the fill

    threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=T)


@pytest.mark.parametrize("uri", ["local-task", "sim", "sim:cuda"])
def test_a_thread_whose_first_device_use_is_a_buffer_access_is_checked(uri):
    trace = run(uri, unenrolled_consumer)
    (fill,) = [e["op"] for e in trace.events("op")]
    (read,) = list(trace.events("host_read"))
    assert read["thread"] is not None   # was: null, and the race went unreported
    assert [(f.rule, f.ops) for f in check_trace(trace).findings] == [
        ("hazard.raw", [f"{fill}.0", f"host:{read['thread']}"])]
