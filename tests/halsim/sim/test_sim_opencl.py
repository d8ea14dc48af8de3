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
    dev.sleep(0.000002)                         # the call returned after its issue (1130 ns), then 2 us
    gate.signal(1)                              # at 3130 ns
    done.wait(1, WAIT)
    (issue,) = dev.trace.events("issue")
    (op,) = dev.trace.operations()
    # issued inline by the queue call (no worker wake-up): commit 100 + one event wait 20 + create 1000
    # and record 10 the (unpooled) signal event
    assert (issue["start"], issue["t"], issue["events"]) == (0, 1130, 1)
    assert (op["ready"], op["start"], op["end"]) == (3130, 3180, 3190)
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
    # Each queue call issues inline (1110 ns), then returns; the work is launched after commit 100,
    # before its marker's event is created and recorded (1010): ends at launch + 50 + record 10.
    assert ends == {"0:0": 160, "0:1": 1110 + 160}
    # A callback is registered once its marker is created and recorded — the issue's end (1110):
    # host_fn_ns after that (a marker completes no earlier than its enqueue). One callback thread for
    # both queues, one completion at a time: releasing 0:0's (unpooled) event costs that thread
    # event_destroy_ns before it can run 0:1's callback (0:1's issue ended at 2220 already).
    assert signals == [("s0", 1110 + 1000), ("s1", 1110 + 1000 + 500 + 1000)]


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


def test_a_queue_call_issues_inline_and_returns_after_the_issue(make):
    # As the opencl backend (Adapter.inline_issue): no worker wake-up, the host pays the issue, and a
    # dispatch pays dispatch_commit_ns on top of commit_ns.
    dev = make("opencl", cost_model=dict(COSTS, dispatch_commit_ns=300, submit_ns=7))
    exe = dev.load_executable()
    buf = dev.allocator.allocate_buffer(4096)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 4096, 7, 4)
    t1 = dev.now()
    dev.queue_dispatch([(s, 1)], [(s, 2)], exe, "spin", (1, 1, 1), (10,), (hal.BufferRef(buf, 0, 4096),))
    t2 = dev.now()
    s.wait(2, WAIT)
    # fill: submit 7, then commit 100 + its signal event (create 1000 + record 10)
    # dispatch: submit 7, then commit 100 + dispatch 300 + one wait event 20 + create 1000 + record 10
    assert (t1, t2) == (1117, 1117 + 7 + 1430)
    issues = [(e["op"], e["start"], e["t"], e["events"]) for e in dev.trace.events("issue")]
    assert issues == [("0:0", 7, 1117, 0), ("0:1", 1124, 2554, 1)]
    # the dispatch waits on the fill's marker, recorded before it arrived: no user event
    assert [e["kind"] for e in dev.trace.events("cl_event") if e["action"] == "acquire"] == ["signal", "signal"]


# ready 2260, + launch 50; a fill is 2001 ns (64 bytes at 1e12 GB/s round up to 1 ns), + record 10
@pytest.mark.parametrize("concurrency, starts", [(0, {"0:0": 2310, "0:1": 2310}),
                                                 (1, {"0:0": 2310, "0:1": 2310 + 2011 + 50}),
                                                 (2, {"0:0": 2310, "0:1": 2310})])
def test_device_concurrency_runs_one_queue_at_a_time(make, concurrency, starts):
    # Two queues' fills of 2000 ns, ready at once behind a host gate: with device_concurrency=1 (PoCL's
    # CPU device) the second starts when the first ends; 0 (default) or >= queues: both at once.
    dev = make("opencl", queues=2, cost_model=dict(COSTS, fill_latency_ns=2000, device_concurrency=concurrency))
    buf = dev.allocator.allocate_buffer(4096)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 64, 1, 1, queue_affinity=1 << 0)
    dev.queue_fill([(gate, 1)], [(done, 2)], buf, 64, 64, 1, 1, queue_affinity=1 << 1)
    gate.signal(1)  # at 2260: each call issued inline, 1130 ns (commit 100 + a wait event 20 + a signal 1010)
    done.wait(2, WAIT)
    ops = {o["op"]: o for o in dev.trace.operations()}
    assert {k: o["ready"] for k, o in ops.items()} == {"0:0": 2260, "0:1": 2260}
    assert {k: o["start"] for k, o in ops.items()} == starts


def test_a_wait_does_not_reuse_the_event_of_its_own_consumer_on_another_queue(make):
    """C (queue 1, submitted first) waits s>=2 behind a user event and records s=3; A (queue 0) waits
    s>=1 and signals s=2. Reusing C's recorded event for A's s>=1 made A and C wait on each other (a
    deadlock local-task does not have): an event whose producer, on another queue, still waits on an
    unset user event is not reused — A gets a user event the host signal sets."""
    dev = make("opencl", queues=2)
    buf = dev.allocator.allocate_buffer(64)
    s = dev.create_semaphore()
    dev.queue_fill([(s, 2)], [(s, 3)], buf, 0, 32, 9, 1, queue_affinity=2)   # C
    dev.queue_fill([(s, 1)], [(s, 2)], buf, 32, 32, 7, 1, queue_affinity=1)  # A
    s.signal(1)
    s.wait(3, WAIT)
    assert buf.map_read() == bytes([9]) * 32 + bytes([7]) * 32
    (issue_a,) = [e for e in dev.trace.events("issue") if e["op"] == "0:1"]
    assert issue_a["events"] == 1 and "after" not in issue_a   # a user event, no producer's event


def test_a_wait_does_not_reuse_an_event_recorded_behind_its_own_consumer(make):
    """P (queue 1, no waits, signals s=3) sits behind C (waits s>=2) on its in-order queue; A on queue 0
    waits s>=1 and signals s=2. P's event is reached only after C, which waits on A: reusing it for A's
    s>=1 deadlocked, though P itself waits on no user event."""
    dev = make("opencl", queues=2)
    buf = dev.allocator.allocate_buffer(64)
    s, x = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([(s, 2)], [(x, 1)], buf, 0, 16, 9, 1, queue_affinity=2)   # C
    dev.queue_fill([], [(s, 3)], buf, 16, 16, 8, 1, queue_affinity=2)       # P
    dev.queue_fill([(s, 1)], [(s, 2)], buf, 32, 32, 7, 1, queue_affinity=1)  # A
    s.signal(1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(s, 3), (x, 1)], WAIT)
    assert buf.map_read() == bytes([9]) * 16 + bytes([8]) * 16 + bytes([7]) * 32
