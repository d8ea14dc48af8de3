"""Sixth pass: semaphore, deadlock and lifetime rules (``docs/checks.md``) — a DEFERRED host call's
hand-over (HAL Q12), one op's signal list signaled in order, a higher signal hidden from its value
neighbours, and a dealloca not ordered after its alloca (Q8)."""

import threading

import pytest

from halsim.sim import DeadlockError
from reference import hal
from tests.checks.barrier_programs import findings

S = hal.StatusCode
DEFERRED_NEVER_SIGNALED = ("host call 0:0 finished without signaling s0=1 (its function returned DEFERRED, "
                           "taking the signal over) and nothing signaled it since: signal or fail ctx.signal "
                           "when the deferred work ends")


# -- deadlock: a host call that returned DEFERRED and whose list nobody signals ---------------------

@pytest.mark.parametrize("uri", ["sim", "sim:metal"])
def test_a_host_wait_on_a_deferred_host_call_nobody_signals_is_host_wait(uri):
    dev = hal.create_device(uri)
    s = dev.create_semaphore()
    dev.queue_host_call([], [(s, 1)], lambda args, ctx: S.DEFERRED)
    with pytest.raises(DeadlockError):
        s.wait(1, 5.0)
    dev.close()
    assert findings(dev.trace) == [
        ("deadlock.host_wait", [],
         "host thread 0 waits for s0>=1 but no operation signals s0 to >= 1 and no other host thread did; "
         + DEFERRED_NEVER_SIGNALED)]


def test_a_barrier_behind_a_deferred_host_call_nobody_signals_is_unsignaled():
    dev = hal.create_device("sim")
    s, t = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_host_call([], [(s, 1)], lambda args, ctx: S.DEFERRED)
    dev.queue_barrier([(s, 1)], [(t, 1)])
    with pytest.raises(DeadlockError):
        t.wait(1, 5.0)
    dev.close()
    # (the host wait on t: the stuck barrier would signal it, so its own finding is the root cause)
    assert findings(dev.trace) == [
        ("deadlock.unsignaled", ["0:1"],
         "barrier 0:1 waits for s0>=1 but nothing signals s0 to >= 1 (it stays at 0); " + DEFERRED_NEVER_SIGNALED)]


def test_a_deferred_host_call_whose_thread_signals_is_clean():
    with hal.create_device("sim") as dev:
        s, t = dev.create_semaphore(), dev.create_semaphore()

        def fn(args, ctx):
            sig = ctx.signal
            threading.Thread(target=lambda: [sem.signal(v) for sem, v in sig]).start()
            return S.DEFERRED

        dev.queue_host_call([], [(s, 1)], fn)
        dev.queue_barrier([(s, 1)], [(t, 1)])
        t.wait(1, 5.0)
    assert findings(dev.trace) == []


# -- semaphore: one op's signal list is signaled in order -----------------------------------------

@pytest.mark.parametrize("uri", ["sim", "local-task", "local-sync"])
def test_one_op_signaling_a_semaphore_twice_in_increasing_order_is_clean(uri):
    with hal.create_device(uri) as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 1), (s, 2)])
        s.wait(2, 5.0)
        assert s.query() == 2
    assert findings(dev.trace) == []


@pytest.mark.parametrize("uri", ["sim", "local-task", "local-sync"])
def test_one_op_signaling_a_semaphore_twice_in_decreasing_order_is_non_monotonic(uri):
    dev = hal.create_device(uri)
    s, t = dev.create_semaphore(), dev.create_semaphore()
    signals = [(s, 2), (s, 1), (t, 1)]   # s=1 is refused: the whole list fails, t too
    if uri == "local-sync":   # (the op runs inside the call: its refused signal raises there)
        with pytest.raises(hal.HalError) as e:
            dev.queue_barrier([], signals)
        assert e.value.code == S.INVALID_ARGUMENT
    else:
        dev.queue_barrier([], signals)
    with pytest.raises(hal.HalError) as e:
        t.wait(1, 5.0)
    assert e.value.code == S.INVALID_ARGUMENT
    dev.close()
    assert findings(dev.trace) == [
        ("semaphore.non_monotonic", ["0:0"],
         "barrier 0:0 signals s0=2 then s0=1 (its signal list is signaled in order): timeline values must "
         "increase, so list them in increasing order")]


# -- semaphore: a higher signal before a lower one, an unordered value between them ---------------

@pytest.mark.parametrize("budget", [None, 0])
def test_a_lower_signal_after_a_higher_one_is_non_monotonic_despite_an_unordered_value_between(monkeypatch, budget):
    """With no budget for the full check (thousands of racing signals), the neighbour comparison alone
    still reports the races; the non-monotonic pair it cannot see is then missed."""
    if budget is not None:
        monkeypatch.setattr("halsim.checks.rules.semaphore.FULL_CHECK_BUDGET", budget)
    with hal.create_device("sim", queues=2) as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 4)], queue_affinity=2)     # 0:0, unordered with the rest
        dev.queue_barrier([], [(s, 5)], queue_affinity=1)     # 0:1
        s.wait(5, 5.0)
        dev.queue_barrier([], [(s, 3)], queue_affinity=1)     # 0:2: after 0:1 (host wait), 3 <= 5
        dev.sleep(0.001)
        with pytest.raises(hal.HalError) as e:
            s.query()
        assert e.value.code == S.INVALID_ARGUMENT
        trace = dev.trace
    full = [("semaphore.non_monotonic", ["0:1", "0:2"],
             "barrier 0:2 signals s0=3 after barrier 0:1 signaled s0=5: timeline values must increase")]
    assert findings(trace) == (full if budget is None else []) + [
        ("semaphore.racing_signals", ["0:0", "0:1"],
         "barrier 0:0 signals s0=4 and barrier 0:1 signals s0=5 with nothing ordering them: the final "
         "value depends on timing"),
        ("semaphore.racing_signals", ["0:0", "0:2"],
         "barrier 0:2 signals s0=3 and barrier 0:0 signals s0=4 with nothing ordering them: the final "
         "value depends on timing"),
    ]


def test_a_host_signal_below_an_earlier_higher_one_is_found_through_a_racing_middle_value():
    with hal.create_device("sim", queues=2) as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 6)], queue_affinity=2)     # 0:0, unordered with the host
        s.signal(7)
        with pytest.raises(hal.HalError) as e:
            s.signal(5)   # after its own 7 (program order); the HAL refuses it
        assert e.value.code == S.INVALID_ARGUMENT
        dev.sleep(0.001)
        trace = dev.trace
    assert [(r, o) for r, o, _m in findings(trace)] == [
        ("semaphore.non_monotonic", []),
        ("semaphore.racing_signals", ["0:0"]),
        ("semaphore.racing_signals", ["0:0"]),
    ]
    assert findings(trace)[0][2] == ("host thread 0 signals s0=5 after host thread 0 signaled s0=7: timeline "
                                     "values must increase")


# -- semaphore: a DEFERRED host call's thread fails the list ---------------------------------------

def test_a_deferred_host_call_whose_thread_fails_the_list_does_not_signal_after_failure():
    with hal.create_device("local-task") as dev:
        s = dev.create_semaphore()

        def fn(args, ctx):
            sig = ctx.signal
            th = threading.Thread(target=lambda: [sem.fail(S.ABORTED, "callback failed") for sem, _ in sig])
            th.start()
            th.join(5)   # (the fail lands before the host call's op_done)
            return S.DEFERRED

        dev.queue_host_call([], [(s, 1)], fn)
        with pytest.raises(hal.HalError) as e:
            s.wait(1, 5.0)
        assert (e.value.code, e.value.message) == (S.ABORTED, "callback failed")
        trace = dev.trace
    assert findings(trace) == []


def test_a_host_call_signaling_what_the_host_failed_before_it_still_signals_after_failure():
    with hal.create_device("sim") as dev:
        s = dev.create_semaphore()
        s.fail(S.ABORTED, "producer crashed")
        dev.queue_host_call([], [(s, 1)], lambda args, ctx: None)   # returns OK: the queue signals s
        dev.sleep(0.001)
    assert findings(dev.trace) == [
        ("semaphore.signal_after_failure", ["0:0"],
         "host_call 0:0 signals s0=1 after s0 failed (status 10: producer crashed); the signal is lost")]


# -- lifetime: a dealloca must be ordered after its alloca ----------------------------------------

DEALLOCA_BEFORE_ALLOCA = ("lifetime.use_before_alloca", ["0:0", "0:1"],
                          "dealloca 0:1 of transient buffer b0 is not ordered after its alloca 0:0: the storage "
                          "may not be committed yet; wait for the alloca's signal")


@pytest.mark.parametrize("uri", ["sim", "sim:cuda"])
def test_a_dealloca_not_ordered_after_its_alloca_is_use_before_alloca(uri):
    dev = hal.create_device(uri)
    s, t, u = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    tmp = dev.queue_alloca([(s, 1)], [(u, 1)], 64)        # 0:0
    dev.queue_dealloca([], [(t, 1)], tmp)                 # 0:1: should wait for u >= 1
    dev.sleep(0.001)
    s.signal(1)
    with pytest.raises(hal.HalError) as e:
        dev.wait_semaphores(hal.WaitMode.ALL, [(t, 1), (u, 1)], 5.0)
    assert e.value.code == S.FAILED_PRECONDITION   # (the device failed the dealloca: storage not committed)
    dev.close()
    assert findings(dev.trace) == [DEALLOCA_BEFORE_ALLOCA]


def test_a_dealloca_not_ordered_after_its_alloca_is_found_whichever_ran_first():
    # on local-task the dealloca may run before or after the alloca commits: the finding is the same
    dev = hal.create_device("local-task")
    s, t, u = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    tmp = dev.queue_alloca([(s, 1)], [(u, 1)], 64)
    dev.queue_dealloca([], [(t, 1)], tmp)
    s.signal(1)
    try:
        dev.wait_semaphores(hal.WaitMode.ALL, [(t, 1), (u, 1)], 5.0)
    except hal.HalError as e:
        assert e.code == S.FAILED_PRECONDITION
    dev.close()
    assert findings(dev.trace) == [DEALLOCA_BEFORE_ALLOCA]


def test_a_dealloca_waiting_for_its_alloca_is_clean():
    with hal.create_device("sim") as dev:
        s, t, u = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        tmp = dev.queue_alloca([(s, 1)], [(u, 1)], 64)
        dev.queue_dealloca([(u, 1)], [(t, 1)], tmp)
        s.signal(1)
        t.wait(1, 5.0)
    assert findings(dev.trace) == []


def test_a_dealloca_whose_wait_failed_before_its_alloca_is_clean():
    # it never ran (Q9): nothing to order after the alloca
    with hal.create_device("sim") as dev:
        s, gate, d = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        tmp = dev.queue_alloca([], [(s, 1)], 64)
        gate.fail(S.CANCELLED, "dealloca wait failed")
        with pytest.raises(hal.HalError) as e:   # (the call returns the failure, as local-task's submit)
            dev.queue_dealloca([(gate, 1)], [(d, 1)], tmp)
        assert (e.value.code, e.value.message) == (S.CANCELLED, "dealloca wait failed")
        s.wait(1, 5.0)
        dev.sleep(0.001)
    assert findings(dev.trace) == []
