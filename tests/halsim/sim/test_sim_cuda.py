"""sim:cuda: pending queue actions, CUevent pools, the 32-wait limit, sticky failure, callback streams."""

import pytest

from halsim.sim import DeadlockError
from reference import hal
from tests.conftest import WAIT
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
# Small distinct costs so every expected time below can be worked out by hand.
COSTS = costs(commit_ns=100, event_record_ns=10, event_wait_ns=20, event_create_ns=1000, event_destroy_ns=500,
              host_fn_ns=1000, launch_ns=50, wake_ns=5)


def evs(dev, kind):
    return list(dev.trace.events(kind))


def test_a_ready_action_is_issued_past_an_earlier_pending_one(make):
    dev = make("cuda", cost_model=COSTS)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(gate, 1)], [(a, 1)])   # 0:0 pending: nothing recorded an event for gate
    dev.queue_barrier([], [(b, 1)])            # 0:1 ready: issued past 0:0
    b.wait(1, WAIT)
    # 0:1 is launched at 105 (wake 5 + commit 100; its event is recorded after: 10), runs 155-165 (launch
    # 50, the record 10 on the stream); callback at 165 + 1000 host_fn, +5 wake
    assert (dev.now(), a.query()) == (1170, 0)
    gate.signal(1)                              # host signal at 1170: a scan issues 0:0
    a.wait(1, WAIT)
    assert [(e["op"], e["start"], e["t"]) for e in evs(dev, "issue")] == [("0:1", 5, 115), ("0:0", 1175, 1285)]
    assert [(o["op"], o["ready"], o["start"], o["end"]) for o in dev.trace.operations()] == [
        ("0:0", 1275, 1325, 1335), ("0:1", 105, 155, 165)]


def test_consumer_before_producer_on_one_queue_costs_a_round_trip_not_a_deadlock(make):
    dev = make("cuda", cost_model=COSTS)
    s, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(s, 1)], [(done, 1)])   # consumer first, same queue
    dev.queue_barrier([], [(s, 1)])            # producer
    done.wait(1, WAIT)
    issue = {e["op"]: e["t"] for e in evs(dev, "issue")}
    signal_s = next(e["t"] for e in evs(dev, "signal") if e["sem"] == "s0")
    # The consumer is issued only after the producer's callback signalled s on the host.
    assert issue == {"0:1": 115, "0:0": signal_s + 5 + 110}
    assert dev.trace.header["personality"] == "cuda"


def test_a_device_wait_reuses_the_producers_recorded_event(make):
    dev = make("cuda", cost_model=costs(**{**COSTS, "fill_latency_ns": 100_000}))
    buf = dev.allocator.allocate_buffer(64)
    s, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)            # long producer
    dev.sleep(0.00001)                                          # 10 us: the worker has recorded s>=1
    dev.queue_copy([(s, 1)], [(done, 1)], buf, 0, buf, 32, 32)  # waits on the recorded CUevent
    done.wait(1, WAIT)
    (fill, copy) = dev.trace.operations()
    (_, copy_issue) = evs(dev, "issue")
    assert copy_issue["events"] == 1
    assert copy_issue["t"] < fill["end"]              # issued before the producer finished: no round trip
    assert copy["ready"] == fill["end"]               # the stream ran it right behind the fill
    assert buf.map_read(32, 32) == bytes([7]) * 32


def test_event_pool_exhaustion_creates_and_destroys_unpooled_events(make):
    dev = make("cuda", event_pool_capacity=2, cost_model=costs(**{**COSTS, "fill_latency_ns": 100_000}))
    buf = dev.allocator.allocate_buffer(16)
    sems = [dev.create_semaphore() for _ in range(4)]
    for s in sems:  # four signals in flight at once: the pool has two events
        dev.queue_fill([], [(s, 1)], buf, 0, 16, 1, 1)
    sems[-1].wait(1, WAIT)
    pool = [(e["action"], e["sem"], e["pooled"], e["in_use"], e["free"]) for e in evs(dev, "cuda_event")]
    assert pool == [
        ("acquire", "s0", True, 1, 1), ("acquire", "s1", True, 2, 0),
        ("acquire", "s2", False, 3, 0), ("acquire", "s3", False, 4, 0),
        ("release", "s0", True, 3, 1), ("release", "s1", True, 2, 2),
        ("release", "s2", False, 1, 2), ("release", "s3", False, 0, 2)]
    assert (dev.unpooled_events, dev.peak_events_in_use) == (2, 4)
    # Creating an event costs the worker event_create_ns: the 3rd and 4th issues are 1000 ns slower.
    starts = [e["t"] - e["start"] for e in evs(dev, "issue")]
    assert starts == [110, 110, 1110, 1110]


def _producers_behind_a_long_fill(dev, n):
    buf = dev.allocator.allocate_buffer(16)
    dev.queue_fill([], [], buf, 0, 16, 1, 1)                  # 100 us at the head of stream 0
    sems = [dev.create_semaphore() for _ in range(n)]
    for s in sems:
        dev.queue_barrier([], [(s, 1)])                       # issued, stuck behind the fill
    dev.sleep(0.00005)                                        # 50 us: every producer event is recorded
    return sems


@pytest.mark.parametrize("n, status", [(32, S.OK), (33, S.RESOURCE_EXHAUSTED)])
def test_more_than_32_wait_events_in_one_action_is_resource_exhausted(make, n, status):
    dev = make("cuda", queues=2, cost_model=costs(**{**COSTS, "fill_latency_ns": 100_000}))
    sems = _producers_behind_a_long_fill(dev, n)
    done, later = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(s, 1) for s in sems], [(done, 1)], queue_affinity=1 << 1)
    if status == S.OK:
        done.wait(1, WAIT)
        assert evs(dev, "issue")[-1]["events"] == 32
        return
    with pytest.raises(hal.HalError) as ei:
        done.wait(1, WAIT)
    assert ei.value.code == S.RESOURCE_EXHAUSTED
    assert "exceeded maximum queue action wait event limit (32) in op 0:" in ei.value.message
    # Sticky: an unrelated later action fails with the same status.
    dev.queue_barrier([], [(later, 1)])
    with pytest.raises(hal.HalError) as ei:
        later.wait(1, WAIT)
    assert ei.value.code == S.RESOURCE_EXHAUSTED


def test_a_failed_wait_fails_the_signals_and_every_later_action(make):
    dev = make("cuda", cost_model=COSTS)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    gate.fail(S.DATA_LOSS, "producer died")
    dev.queue_barrier([(gate, 1)], [(a, 1)])
    dev.queue_barrier([], [(b, 1)])
    for sem in (a, b):
        with pytest.raises(hal.HalError) as ei:
            sem.wait(1, WAIT)
        assert ei.value.code == S.DATA_LOSS
    assert [(o["op"], o["status"]) for o in dev.trace.operations()] == [("0:0", S.DATA_LOSS), ("0:1", S.DATA_LOSS)]


def test_two_semaphore_cycle_raises_deadlock_with_the_chain(make):
    dev = make("cuda")
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(a, 1)], [(b, 1)])
    dev.queue_barrier([(b, 1)], [(a, 1)])
    with pytest.raises(DeadlockError) as ei:
        b.wait(1)
    assert ei.value.code == S.ABORTED
    assert "two-semaphore cycle s0 -> s1: 0:0 waits s0>=1, signaled by 0:1; 0:1 waits s1>=1, signaled by 0:0" \
        in ei.value.message


def test_host_call_runs_on_the_callback_stream(make):
    dev = make("cuda", cost_model=COSTS)
    done = dev.create_semaphore()
    seen = []
    dev.queue_host_call([], [(done, 1)], lambda args, ctx: seen.append(dev.now()), (1, 2, 3, 4))
    done.wait(1, WAIT)
    # launched at 105 (wake 5 + commit 100; the record 10 follows), the GPU reaches it at once, then host_fn.
    assert seen == [1105]
    (op,) = dev.trace.operations()
    assert (op["ready"], op["end"]) == (105, 1105)


def test_event_pool_capacity_is_a_cuda_option(make):
    with pytest.raises(hal.HalError) as ei:
        make("cuda", event_pool_capacity=-1)
    assert (ei.value.code, "event_pool_capacity=-1" in ei.value.message) == (S.INVALID_ARGUMENT, True)
    with pytest.raises(hal.HalError) as ei:
        make("generic", event_pool_capacity=4)
    assert ei.value.code == S.INVALID_ARGUMENT and "unknown option 'event_pool_capacity'" in ei.value.message
    dev = hal.create_device("sim:cuda?event_pool_capacity=4")
    try:
        assert dev.pool_capacity == 4
    finally:
        dev.close()


def test_callbacks_of_two_queues_run_in_issue_order_on_one_callback_stream(make):
    # The producer's host callback waits behind eight others; the consumer (queue 1, waiting on the
    # producer's recorded CUevent) was issued after it, so its host function is behind the producer's
    # on the device's one callback stream (IREE enqueues each at issue; the real engine's completion
    # thread too): s=1 then s=2. Until 2026-11-24 each queue had its own callback stream, the
    # consumer signalled s=2 first and the producer's list_signal(s=1) failed s and the device.
    dev = make("cuda", queues=2, cost_model=costs(host_fn_ns=8_000))
    s = dev.create_semaphore()
    for _ in range(8):
        dev.queue_barrier([], [(dev.create_semaphore(), 1)])
    dev.queue_barrier([], [(s, 1)])                                   # 0:8, the producer
    dev.sleep(0.00002)
    dev.queue_barrier([(s, 1)], [(s, 2)], queue_affinity=1 << 1)      # 0:9, the consumer
    s.wait(2, WAIT)
    later = dev.create_semaphore()
    dev.queue_barrier([], [(later, 1)])
    later.wait(1, WAIT)                                               # no sticky failure
    changes = [(e["ev"], e.get("value"), e["cause"]) for e in dev.trace if e["ev"] in ("signal", "fail")
               and e["sem"] == s.id]
    assert changes == [("signal", 1, "0:8"), ("signal", 2, "0:9")]
    signals = {e["cause"]: e["t"] for e in dev.trace.events("signal")}
    assert [signals[f"0:{i}"] - signals[f"0:{i - 1}"] for i in range(1, 10)] == [8_000] * 9


def test_a_short_action_issued_after_a_long_one_completes_after_it(make):
    """Issue order, not GPU order: a fill on queue 1 that the GPU finishes first still has its host
    callback behind the earlier-issued long fill's on queue 0."""
    dev = make("cuda", queues=2, cost_model=costs(host_fn_ns=1_000, fill_latency_ns=0, fill_gb_per_s=1))
    buf = dev.allocator.allocate_buffer(1 << 20)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([], [(a, 1)], buf, 0, 1 << 20, 1, 1)                            # ~1 ms on the GPU
    dev.queue_fill([], [(b, 1)], buf, 0, 4, 2, 1, queue_affinity=1 << 1)           # 4 ns
    b.wait(1, WAIT)
    done = {e["op"]: e["t"] for e in dev.trace.events("op_done")}
    signals = {e["cause"]: e["t"] for e in dev.trace.events("signal")}
    assert done["0:1"] < done["0:0"]
    assert signals["0:1"] == signals["0:0"] + 1_000


def test_queue_flush_rescans_and_a_pending_action_reuses_an_event_recorded_since(make):
    """IREE's queue_flush re-runs issue(): the consumer submitted before its producer finds the event
    the producer's issue recorded since (a record triggers no scan), instead of waiting for the
    producer's callback, a host round trip later (queue_flush did nothing)."""
    dev = make("cuda", cost_model=costs(**{**COSTS, "fill_latency_ns": 100_000}))
    buf = dev.allocator.allocate_buffer(64)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([(a, 1)], [(b, 1)])            # 0:0 pending: nothing recorded for a >= 1
    dev.queue_fill([], [(a, 1)], buf, 0, 64, 7, 1)   # 0:1 issued at once, its event recorded at 115
    dev.sleep(0.00001)
    flushed_at = dev.now()
    dev.queue_flush()                                # a scan at the flush
    b.wait(1, WAIT)
    issues = {e["op"]: e for e in evs(dev, "issue")}
    assert (issues["0:0"]["start"], issues["0:0"]["events"]) == (flushed_at + 5, 1)  # + wake_ns; 1 CUevent
    fill_end = next(o["end"] for o in dev.trace.operations() if o["op"] == "0:1")
    assert issues["0:0"]["t"] < fill_end


def test_unpooled_event_destroys_delay_every_later_callback_on_the_one_callback_path(make):
    """With no pool every callback destroys its action's event (event_destroy_ns on the callback
    path): callbacks queued behind it start that much later. Only callbacks scheduled after a destroy
    ran used to pay it, so identical completions were spaced 1000, 1000, 1500, 1000, 1500 ns."""
    def gaps(capacity):
        dev = make("cuda", cost_model=costs(**{**COSTS, "fill_latency_ns": 20_000}),
                   event_pool_capacity=capacity)
        buf = dev.allocator.allocate_buffer(64)
        s, g = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([], [(g, 1)], buf, 0, 64, 7, 1)  # a long op: the barriers' callbacks queue up
        for v in range(1, 6):
            dev.queue_barrier([], [(s, v)])
        s.wait(5, WAIT)
        times = [e["t"] for e in evs(dev, "signal")]
        return [b - a for a, b in zip(times, times[1:])]

    assert gaps(32) == [1000] * 5                 # host_fn_ns apart
    assert gaps(0) == [1000 + 500] * 5            # + event_destroy_ns of the callback before
