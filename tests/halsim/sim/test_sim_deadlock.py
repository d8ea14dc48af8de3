"""Deadlocks: when nothing can ever advance, blocked calls raise DeadlockError with the wait-for chain."""

import pickle
import threading

import pytest

from halsim.sim import DeadlockError, DeadlockReport
from reference import hal
from tests.conftest import WAIT, join
from tests.halsim.sim.conftest import costs

S = hal.StatusCode


def raises_deadlock(fn, *args) -> DeadlockError:
    with pytest.raises(DeadlockError) as ei:
        fn(*args)
    assert isinstance(ei.value, hal.HalError)
    return ei.value


def test_two_semaphore_cycle_between_queue_operations(make):
    dev = make("generic")
    a, b = dev.create_semaphore(), dev.create_semaphore()     # s0, s1
    dev.queue_barrier([(a, 1)], [(b, 1)])                      # op 0:0 waits s0, signals s1
    dev.queue_barrier([(b, 1)], [(a, 1)])                      # op 0:1 waits s1, signals s0
    e = raises_deadlock(b.wait, 1)
    assert e.code == S.ABORTED
    assert "two-semaphore cycle s0 -> s1" in e.message
    assert "0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0" in e.message
    assert "host thread 0 blocked in wait_semaphores(all) waiting for s1>=1 (now 0)" in e.message
    (cycle,) = e.report.cycles
    assert (cycle.ops, cycle.semaphores, cycle.values) == (("0:0", "0:1"), ("s0", "s1"), (1, 1))
    assert [o.op for o in e.report.ops] == ["0:0", "0:1"]
    assert e.report.threads[0].waits[0].signalers == ("0:0",)
    assert e.report.unsignaled == ()


def test_host_wait_that_nobody_can_satisfy(make):
    dev = make("generic")
    s = dev.create_semaphore()
    e = raises_deadlock(s.wait, 1)
    assert e.code == S.ABORTED
    assert "no pending operation or host thread signals s0 to >= 1" in e.message
    (t,) = e.report.threads
    assert (t.thread, t.call, str(t.waits[0])) == (0, "wait_semaphores(all)", "s0>=1 (now 0)")
    assert [str(w) for w in e.report.unsignaled] == ["s0>=1 (now 0)"]
    assert e.message.splitlines()[0] == "deadlock: host thread 0 in wait_semaphores(all) can never return"
    s.signal(1)  # the device still works afterwards
    s.wait(1)


def test_a_signaler_that_does_not_reach_the_value(make):
    dev = make("generic")
    gate, s = dev.create_semaphore(), dev.create_semaphore(5)
    dev.queue_barrier([(gate, 1)], [(s, 6)])  # would signal s1 = 6, but waits on s0 that nobody signals
    e = raises_deadlock(dev.wait_semaphores, hal.WaitMode.ALL, [(s, 7)])
    assert "no pending operation or host thread signals s1 to >= 7" in e.message
    assert "no pending operation or host thread signals s0 to >= 1" in e.message
    assert "op 0:0 (barrier, queue 0) waits for s0>=1 (now 0); signals s1=6" in e.message
    assert "(now 5)" in str(e.report.threads[0])


def test_finite_timeout_deadlock_raises_deadline_exceeded_exactly_at_the_deadline(make):
    dev = make("generic", cost_model=costs(host_api_ns=100))
    s = dev.create_semaphore()                         # clock 100
    e = raises_deadlock(s.wait, 1, 2.5)                # called at 200
    assert e.code == S.DEADLINE_EXCEEDED
    assert "reached its deadline" in e.message and "s0>=1" in e.message
    assert dev.now() == 200 + 2_500_000_000
    (wait,) = dev.trace.events("host_wait")
    assert (wait["start"], wait["t"], wait["status"]) == (200, 2_500_000_200, int(S.DEADLINE_EXCEEDED))


def test_only_the_earliest_deadline_expires_then_the_program_goes_on(make):
    dev = make("generic")
    s, u = dev.create_semaphore(), dev.create_semaphore()
    got = []
    t = threading.Thread(target=lambda: (s.wait(1), got.append(dev.now())))
    t.start()
    e = raises_deadlock(u.wait, 1, 1.0)       # nothing will signal u: times out at 1 s
    assert e.code == S.DEADLINE_EXCEEDED
    assert len(e.report.threads) == 2         # the other thread was blocked too
    s.signal(1)                               # ... but it was not deadlocked: main signals after all
    join(t)
    assert got and got[0] >= 10**9


def test_sim_sync_single_thread_wait_before_signal(make):
    dev = make("sync")
    s, done = dev.create_semaphore(), dev.create_semaphore()
    e = raises_deadlock(dev.queue_barrier, [(s, 1)], [(done, 1)])
    assert e.code == S.ABORTED
    (t,) = e.report.threads
    assert (t.call, t.op) == ("queue_barrier (op 0:0)", "0:0")
    assert "no pending operation or host thread signals s0 to >= 1" in e.message
    assert done.query() == 0 and done.failure is None  # nothing signaled
    (op,) = dev.trace.operations()
    assert op["status"] == int(S.ABORTED)


def test_sim_sync_same_thread_chain_names_the_blocked_operation(make):
    dev = make("sync")
    a, b = dev.create_semaphore(), dev.create_semaphore()
    e = raises_deadlock(dev.queue_host_call, [(a, 1)], [(b, 1)], lambda args, ctx: None)
    assert "host thread 0 blocked in queue_host_call (op 0:0) waiting for s0>=1 (now 0)" in e.message


def test_two_threads_waiting_for_each_other(make, personality):
    dev = make(personality)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    errors = []

    def other():
        try:
            a.wait(1, WAIT * 100)  # a finite but far deadline: the other thread's infinite wait...
        except DeadlockError as e:
            errors.append(e)
        b.signal(1)

    t = threading.Thread(target=other)
    t.start()
    b.wait(1)  # ... times out first only if nothing else can happen: then b is signaled
    join(t)
    (e,) = errors
    assert e.code == S.DEADLINE_EXCEEDED
    assert sorted(x.thread for x in e.report.threads) == [0, 1]


def test_cycle_through_three_operations(make):
    dev = make("generic", queues=3)
    s = [dev.create_semaphore() for _ in range(3)]
    for i in range(3):
        dev.queue_barrier([(s[i], 1)], [(s[(i + 1) % 3], 1)], queue_affinity=1 << i)
    e = raises_deadlock(s[0].wait, 1)
    (cycle,) = e.report.cycles
    # 0:0 waits s0, which 0:2 signals; 0:2 waits s2, which 0:1 signals; 0:1 waits s1, which 0:0 signals
    assert cycle.ops == ("0:0", "0:2", "0:1") and cycle.semaphores == ("s0", "s2", "s1")
    assert "three-semaphore cycle s0 -> s2 -> s1" in e.message


def test_deadlock_error_clones_and_pickles_with_its_report(make):
    dev = make("generic")
    e = raises_deadlock(dev.create_semaphore().wait, 1)
    for copy in (e.clone(), pickle.loads(pickle.dumps(e))):
        assert type(copy) is DeadlockError
        assert (copy.code, copy.message) == (e.code, e.message)
        assert isinstance(copy.report, DeadlockReport) and copy.report == e.report


def test_pending_operations_are_cancelled_at_close(make):
    dev = make("generic")
    gate, out = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(out, 1)])
    dev.close()
    assert (out.failure.code, out.failure.message) == (S.CANCELLED, "queue shutting down")


def test_a_chain_behind_a_missing_signal_is_no_cycle(make):
    """Ops of one timeline chained behind a gate nobody signals: each waits for the value the op
    before it signals first, never for its own signal, so the report shows the missing signal and
    no cycles (it used to list each op as waiting on itself, and consecutive ops on each other)."""
    dev = make("generic")
    gate, s = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(s, 1)])
    dev.queue_barrier([(s, 1)], [(s, 2)])
    dev.queue_barrier([(s, 2)], [(s, 3)])
    e = raises_deadlock(s.wait, 3)
    assert e.report.cycles == ()
    waits = {o.op: o.waits for o in e.report.ops}
    assert [(w.sem, w.value, w.signalers, w.first) for w in waits["0:1"]] == [("s1", 1, ("0:0", "0:2"), ("0:0",))]
    assert [(w.signalers, w.first) for w in waits["0:2"]] == [(("0:1",), ("0:1",))]
    assert [w.why() for w in waits["0:1"]] == ["s1>=1 would be signaled by pending op 0:0 (then 1 later op)"]
    assert [(w.sem, w.value) for w in e.report.unsignaled] == [("s0", 1)]
    assert "cycles:" not in str(e.report)
