"""sim:opencl: in-order queues, actions issued at once with user events, unpooled events, one callback thread."""

import pytest

from halsim.sim import DeadlockError
from reference import hal
from tests.conftest import WAIT
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
COSTS = costs(commit_ns=100, event_record_ns=10, event_wait_ns=20, event_create_ns=1000, event_destroy_ns=500,
              host_fn_ns=1000, launch_ns=50, wake_ns=5)


def test_same_queue_wait_before_signal_deadlocks_the_in_order_queue(make):
    dev = make("opencl")
    s, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(s, 1)], [(done, 1)])   # 0:0 stalls queue 0 on a user event for s >= 1
    dev.queue_barrier([], [(s, 1)])            # 0:1 is behind it and would signal s
    with pytest.raises(DeadlockError) as ei:
        done.wait(1)
    assert ei.value.code == S.ABORTED
    assert "same-queue wait-before-signal on in-order queue 0: 0:0 waits s0>=1, signaled by 0:1; " \
           "0:1 is queued behind 0:0 on in-order queue 0" in ei.value.message
    (cycle,) = ei.value.report.cycles
    assert cycle.in_order and cycle.ops == ("0:0", "0:1")


def test_the_same_program_on_two_queues_runs(make):
    dev = make("opencl", queues=2, cost_model=COSTS)
    s, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(s, 1)], [(done, 1)])
    dev.queue_barrier([], [(s, 1)], queue_affinity=1 << 1)
    done.wait(1, WAIT)
    issues = [(e["op"], e["events"]) for e in dev.trace.events("issue")]
    assert issues == [("0:0", 1), ("0:1", 0)]   # the consumer was issued first, with one user event


def test_a_consumer_is_issued_at_once_and_runs_when_the_host_sets_its_user_event(make):
    dev = make("opencl", queues=2, cost_model=COSTS)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(done, 1)], queue_affinity=1 << 1)
    dev.sleep(0.000002)                         # 2 us: issued long before the host signals
    gate.signal(1)                              # at 2000 ns
    done.wait(1, WAIT)
    (issue,) = dev.trace.events("issue")
    (op,) = dev.trace.operations()
    # wake 5 + commit 100 + one event wait 20 + create 1000 and record 10 the (unpooled) signal event
    assert (issue["t"], issue["events"]) == (1135, 1)
    assert (op["ready"], op["start"], op["end"]) == (2000, 2050, 2060)
    events = [(e["action"], e["kind"], e["pooled"]) for e in dev.trace.events("cl_event")]
    assert events == [("acquire", "user", False), ("acquire", "signal", False),
                      ("release", "signal", False), ("release", "user", False)]


def test_one_callback_thread_serializes_completions_of_all_queues(make):
    dev = make("opencl", queues=2, cost_model=COSTS)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([], [(a, 1)])
    dev.queue_barrier([], [(b, 1)], queue_affinity=1 << 1)
    b.wait(1, WAIT)
    signals = [(e["sem"], e["t"]) for e in dev.trace.events("signal")]
    ends = {o["op"]: o["end"] for o in dev.trace.operations()}
    assert ends == {"0:0": 1175, "0:1": 2285}   # the worker issues one after the other (1110 ns each)
    # One callback thread for both queues, one completion at a time: host_fn_ns each, and releasing
    # 0:0's (unpooled) event costs that thread event_destroy_ns before it can run 0:1's callback.
    assert signals == [("s0", 2175), ("s1", 2175 + 500 + 1000)]


def test_a_failed_user_event_fails_the_action_and_later_ones(make):
    dev = make("opencl", queues=2, cost_model=COSTS)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(a, 1)], queue_affinity=1 << 1)
    dev.sleep(0.000001)
    gate.fail(S.ABORTED, "upstream")
    with pytest.raises(hal.HalError) as ei:
        a.wait(1, WAIT)
    assert ei.value.code == S.ABORTED
    dev.queue_barrier([], [(b, 1)])
    with pytest.raises(hal.HalError) as ei:
        b.wait(1, WAIT)
    assert ei.value.code == S.ABORTED


def test_opencl_has_no_event_pool_option(make):
    with pytest.raises(hal.HalError) as ei:
        make("opencl", event_pool_capacity=4)
    assert ei.value.code == S.INVALID_ARGUMENT
