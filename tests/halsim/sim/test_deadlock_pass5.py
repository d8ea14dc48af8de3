"""Deadlock detection and reports, fifth pass: false deadlocks and what the report names."""

import queue
import sys
import threading
from types import SimpleNamespace

import pytest

from halsim.sim import DeadlockError
from halsim.sim.deadlock import build_report
from reference import hal
from tests.conftest import WAIT, join

S = hal.StatusCode
SIM = ["generic", "metal", "cuda", "opencl", "sync"]


# -- a thread that never called the device, woken by the program ----------------------------------------

@pytest.mark.parametrize("personality", SIM)
def test_consumer_started_before_the_device_woken_by_a_host_call_is_waited_for(make, personality):
    """A consumer thread started before the device, idle in Queue.get(), gets work from a host call and
    signals: the host thread's wait for that signal returns (it raised DeadlockError DEADLINE_EXCEEDED
    at once: a thread started before the device never held virtual time back, woken or not)."""
    q = queue.Queue()
    t = threading.Thread(target=lambda: q.get().signal(1))
    t.start()
    dev = make(personality)
    done = dev.create_semaphore()
    dev.queue_host_call([], [], lambda args, ctx: q.put(done))
    try:
        done.wait(1, WAIT)
    finally:
        q.put(SimpleNamespace(signal=lambda v: None))  # (unblocks the consumer if the host call never ran)
        join(t)
    assert done.query() == 1
    assert dev.now() < 10**9  # long before the deadline


@pytest.mark.parametrize("personality", SIM)
def test_thread_in_a_timed_event_wait_woken_by_a_host_call_is_waited_for(make, personality):
    """The same with a timed ``Event.wait`` (a thread in one counts as busy only for GRACE_S after its
    start; started before the device, never): the host call's ``set`` wakes it, and it signals."""
    ev = threading.Event()
    box = []
    t = threading.Thread(target=lambda: ev.wait(WAIT) and box[0].signal(1))
    t.start()
    dev = make(personality)
    done = dev.create_semaphore()
    box.append(done)
    dev.queue_host_call([], [], lambda args, ctx: ev.set())
    try:
        done.wait(1, WAIT)
    finally:
        ev.set()
        join(t)
    assert done.query() == 1


# -- nested host calls on sim:sync ------------------------------------------------------------------------

def test_nested_host_call_waiting_for_the_outer_host_calls_signal_names_it(make):
    """sim:sync runs host calls on the calling thread; a host call's function that queues another host
    call, whose function waits for the OUTER one's signal, waits on itself too. The report names the
    outer host call as the signaler (it said no operation or host thread signals the value)."""
    dev = make("sync")
    a, b = dev.create_semaphore(), dev.create_semaphore()
    got = []

    def inner(args, ctx):
        try:
            a.wait(1)
        except DeadlockError as e:
            got.append(e)
            raise

    dev.queue_host_call([], [(a, 1)], lambda args, ctx: dev.queue_host_call([], [(b, 1)], inner))
    (e,) = got
    assert e.code == S.ABORTED
    (t,) = e.report.threads
    assert (t.thread, t.inside) == (0, "0:1")
    (w,) = t.waits
    assert (w.signalers, w.running) == (("0:0",), (("0:0", 0),))
    assert w.why() == ("s0>=1 would be signaled by op 0:0 (the host call running on host thread 0, blocked in "
                       "its function) only when that function returns")
    assert "host thread 0 waits on itself: op 0:0 signals only when the function waiting here returns" in e.message
    assert e.report.unsignaled == ()
    assert b.failure is not None and b.failure.code == S.ABORTED  # the inner host call failed with it
    assert a.query() == 1  # the outer one returned and signaled


def test_wait_for_a_host_call_running_on_another_thread_names_it(make):
    """sim:sync: host call 1:0's function, on host thread 1, waits in Queue.get(); host thread 0 waits
    for 1:0's signal. The report names 1:0 as running on host thread 1 (it said nothing signals it)."""
    dev = make("sync")
    s, q = dev.create_semaphore(), queue.Queue()
    t = threading.Thread(target=lambda: dev.queue_host_call([], [(s, 1)], lambda args, ctx: q.get() and None))
    t.start()
    try:
        with pytest.raises(DeadlockError) as ei:
            s.wait(1)
    finally:
        q.put(1)
        join(t)
    e = ei.value
    assert e.code == S.ABORTED
    (w,) = e.report.threads[0].waits
    assert (w.signalers, w.running) == (("1:0",), (("1:0", 1),))
    assert ("    s0>=1 would be signaled by op 1:0 (the host call running on host thread 1, blocked in its "
            "function) only when that function returns") in e.message.splitlines()
    assert e.report.unsignaled == () and "waits on itself" not in e.message
    assert s.query() == 1  # the host call returned once its queue had an item


def _sem(sid, payload=0):
    return SimpleNamespace(id=sid, payload=payload, failure=None, poll=lambda value: payload >= value)


def _op(op_id, kind, thread, wait, signal):
    return SimpleNamespace(id=op_id, kind=kind, queue=0, thread=thread, wait=tuple(wait), signal=tuple(signal))


def test_build_report_counts_every_running_host_call_not_only_the_innermost():
    """build_report's ``running_calls``: host calls running on a host thread (outer levels of nested
    ones) signal when their function returns; ``inside`` alone named only the innermost."""
    a, b = _sem("s0"), _sem("s1")
    outer, inner = _op("0:0", "host_call", 0, [], [(a, 1)]), _op("0:1", "host_call", 0, [], [(b, 1)])
    block = SimpleNamespace(thread=SimpleNamespace(index=0), call="wait_semaphores(all)", mode="all",
                            timepoints=((a, 1),), deadline=None, op=None, inside=inner)
    before = build_report(100, [block], [])
    assert before.threads[0].waits[0].signalers == ()  # what the device reported without its running calls
    report = build_report(100, [block], [], None, (outer, inner))
    (w,) = report.threads[0].waits
    assert (w.signalers, w.first, w.running) == (("0:0",), ("0:0",), (("0:0", 0),))
    assert report.unsignaled == () and report.ops == ()
    assert "host thread 0 waits on itself: op 0:0 signals only when the function waiting here returns" in str(report)


# -- waits on failed semaphores ---------------------------------------------------------------------------

@pytest.mark.parametrize("personality", ["cuda", "generic", "metal"])
def test_a_pending_ops_wait_on_a_failed_semaphore_is_reported_as_failed(make, personality):
    """An op stuck on an unmet wait before one on a failed semaphore (sim:cuda resolves its waits in list
    order; sim and sim:metal wait until every wait resolved; sim:opencl fails it at once, as PoCL) stays
    pending: the report says the semaphore failed —
    not "(now 2147483647)", the raw failure payload, nor that nothing signals it."""
    dev = make(personality)
    a, b, s = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(a, 1), (b, 1)], [(s, 1)])
    b.fail(S.DATA_LOSS, "boom")
    with pytest.raises(DeadlockError) as ei:
        s.wait(1, 1.0)
    e = ei.value
    assert e.code == S.DEADLINE_EXCEEDED
    (op,) = e.report.ops
    assert [str(w) for w in op.waits] == ["s0>=1 (now 0)", "s1>=1 (failed: DATA_LOSS: boom)"]
    assert op.waits[1].failure == "DATA_LOSS: boom" and op.waits[1].current == hal.SEMAPHORE_FAILURE_VALUE
    assert "op 0:0 (barrier, queue 0) waits for s0>=1 (now 0), s1>=1 (failed: DATA_LOSS: boom); signals s2=1" \
        in e.message
    which = "unmet waits before it in the op's wait list" if personality == "cuda" else "op's other unmet waits"
    assert (f"    s1 has failed (DATA_LOSS: boom): the wait fails (and the op with it) once the {which} are met"
            in e.message.splitlines())
    assert [(w.sem, w.value) for w in e.report.unsignaled] == [("s0", 1)]
    assert "2147483647" not in e.message and "signals s1 to >= 1" not in e.message
    a.signal(1)  # the op gets to the failed wait: it fails, and so does s
    with pytest.raises(hal.HalError) as ei:
        s.wait(1, 1.0)
    assert ei.value.code == S.DATA_LOSS


# -- a host thread blocked on a plain lock ----------------------------------------------------------------

@pytest.mark.timeout(10)  # (it hung before the fix)
@pytest.mark.parametrize("personality", ["generic", "sync"])
@pytest.mark.parametrize("how", ["with", "acquire", "rlock", "condition"])
def test_timed_wait_beside_a_thread_blocked_on_a_held_lock_expires(make, personality, how):
    """Host thread 0 holds a plain lock and waits 1 s for a signal that host thread 1 makes under that
    lock: thread 1 can do nothing before thread 0 goes on, so the wait times out at its deadline, as on
    local-task (it hung for ever: a thread blocked in C on a lock counted as stalled, and no deadline
    expires while one is)."""
    dev = make(personality)
    s = dev.create_semaphore()
    lock = threading.RLock() if how == "rlock" else threading.Lock()
    cond = threading.Condition(lock)

    def worker():
        dev.create_semaphore()  # a host thread
        if how == "acquire":
            lock.acquire()
            s.signal(1)
            lock.release()
        elif how == "condition":
            with cond:
                s.signal(1)
        else:
            with lock:
                s.signal(1)

    lock.acquire()
    t = threading.Thread(target=worker)
    t.start()
    try:
        with pytest.raises(DeadlockError) as ei:
            s.wait(1, 1.0)
        assert dev.now() == ei.value.report.threads[0].deadline
    finally:
        lock.release()
    join(t)
    e = ei.value
    assert e.code == S.DEADLINE_EXCEEDED
    ((index, where),) = e.report.host_waits
    assert index == 1 and "test_deadlock_pass5.py:" in where
    assert f"  host thread 1 waits in {where}, for another host thread" in e.message.splitlines()
    s.wait(1, WAIT)  # thread 1 signaled once the lock was released


# -- a host call that returned DEFERRED and never signaled ---------------------------------------------

@pytest.mark.parametrize("personality", SIM)
def test_a_wait_for_a_deferred_host_calls_value_names_that_host_call(make, personality):
    dev = make(personality)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_host_call([], [(s, 1), (t, 2)], lambda args, ctx: S.DEFERRED)
    with pytest.raises(DeadlockError) as ei:
        t.wait(1, WAIT)
    (w,) = ei.value.report.unsignaled
    assert (w.sem, w.value, w.deferred) == ("s1", 1, ("0:0",))
    assert ei.value.message.splitlines()[-1] == (
        "  no pending operation or host thread signals s1 to >= 1; host call 0:0 returned DEFERRED (its "
        "function took over signalling it) and has not signaled it")


def test_a_deferred_host_call_whose_list_was_signaled_is_not_named(make):
    dev = make("generic")
    s = dev.create_semaphore()
    dev.queue_host_call([], [(s, 1)], lambda args, ctx: S.DEFERRED)
    dev.queue_host_call([], [(s, 3)], lambda args, ctx: S.DEFERRED)
    s.signal(1)                       # the program signals the first one's list
    with pytest.raises(DeadlockError) as ei:
        s.wait(2, WAIT)
    (w,) = ei.value.report.unsignaled
    assert w.deferred == ("0:1",)     # only the second one could still signal s0 >= 2
    s.signal(3)
    with pytest.raises(DeadlockError) as ei:
        s.wait(4, WAIT)
    assert ei.value.report.unsignaled[0].deferred == ()
    assert ei.value.message.splitlines()[-1] == "  no pending operation or host thread signals s0 to >= 4"


def test_deferred_host_calls_signaled_by_the_program_are_forgotten(make):
    dev = make("generic")
    s = dev.create_semaphore()
    for i in range(1, 601):
        dev.queue_host_call([], [(s, i)], lambda args, ctx: S.DEFERRED)
        s.wait(0, WAIT)  # (runs it)
        s.signal(i)
    assert len(dev._deferred) <= 256


# -- Thread.start's own wait is no hand-off -------------------------------------------------------------

def test_thread_start_waiting_for_its_thread_is_no_wake_up(make):
    """An outside thread seen notified in ``Thread.start`` (waiting for the thread it starts to run)
    was counted as woken by the program and held virtual time back for GRACE_S: every harness that
    runs a program on a thread (t.start(); t.join(timeout)) stalled each simulation for 2 s."""
    from halsim.sim.host_waits import WAKING, _in_thread_start

    dev = make("generic")
    frames = {}

    class Started(threading.Event):
        def wait(self, timeout=None):
            frames["start"] = sys._getframe()  # (Thread.start → Event.wait)
            return super().wait(timeout)

    t = threading.Thread(target=lambda: None)
    t._started = Started()
    t.start()
    join(t)
    assert _in_thread_start(frames["start"])
    assert not _in_thread_start(sys._getframe())
    me = threading.current_thread()
    dev.threads._outside_woken(me, (WAKING, None), frames["start"])
    assert me not in dev.threads._first_seen
    dev.threads._outside_woken(me, (WAKING, None), sys._getframe())  # any other notified wait: a wake-up
    assert me in dev.threads._first_seen


def test_a_host_call_left_by_an_exception_is_no_longer_running(make):
    """sim:sync registers a host call as running while its function runs on the calling thread (for
    deadlock reports); a function left by an exception the body does not turn into a status
    (SystemExit) must not stay registered — a later report would name a dead call as a signaler."""
    dev = make("sync")
    s = dev.create_semaphore()

    def fn(args, ctx):
        raise SystemExit(3)
    with pytest.raises(SystemExit):
        dev.queue_host_call([], [(s, 1)], fn)
    assert dev._running_calls == {}
