"""Virtual time: exact durations from the cost model, no real waiting, concurrency per queue."""

import time

import pytest

from reference import hal
from tests.halsim.sim.conftest import costs

S = hal.StatusCode

TIMED = costs(host_api_ns=10, submit_ns=100, launch_ns=1000, fill_latency_ns=500, fill_gb_per_s=1, wake_ns=50)


def test_an_hour_of_virtual_sleep_takes_no_real_time(make):
    dev = make("generic")
    t0 = time.perf_counter()
    dev.sleep(3600)
    dev.sleep(3600)
    assert time.perf_counter() - t0 < 0.5
    assert dev.now() == 7200 * 10**9


def test_long_device_work_takes_no_real_time(make):
    dev = make("generic", cost_model=costs(kernels={"spin": {"per_unit_ns": 1000}}))
    exe = dev.load_executable()
    scratch = dev.allocator.allocate_buffer(4)
    s = dev.create_semaphore()
    t0 = time.perf_counter()
    for i in range(10):  # ten dispatches of 2e9 iterations at 1 µs each: ~5.5 hours of virtual time
        dev.queue_dispatch([(s, i)], [(s, i + 1)], exe, "spin", (1, 1, 1), (2_000_000_000,), (scratch,))
    s.wait(10)
    assert time.perf_counter() - t0 < 1.0
    assert dev.now() == 10 * 2_000_000_000 * 1000


def test_generic_schedule_is_exact(make):
    dev = make("generic", cost_model=TIMED)
    buf = dev.allocator.allocate_buffer(1000)          # host clock 10
    done = dev.create_semaphore()                      # 20
    assert dev.now() == 20
    dev.queue_fill([], [(done, 1)], buf, 0, 1000, 0xAB, 1)  # +10 +100: enqueued at 130
    done.wait(1)                                        # called at 140
    # ready 130, launch 1000 → start 1130, fill 500 + 1000 B at 1 B/ns → end 2630, wake +50 → 2680
    assert dev.now() == 2680
    (op,) = dev.trace.operations()
    assert (op["t"], op["ready"], op["start"], op["end"]) == (130, 130, 1130, 2630)
    (cmd,) = dev.trace.events("cmd")
    assert (cmd["start"], cmd["t"]) == (1130, 2630)
    (sig,) = dev.trace.events("signal")
    assert (sig["t"], sig["cause"]) == (2630, "0:0")
    (wait,) = dev.trace.events("host_wait")
    assert (wait["start"], wait["t"]) == (140, 2680)
    assert buf.map_read(0, 4) == b"\xab" * 4


def test_sync_schedule_is_exact(make):
    dev = make("sync", cost_model=TIMED)
    buf = dev.allocator.allocate_buffer(1000)
    done = dev.create_semaphore()
    dev.queue_fill([], [(done, 1)], buf, 0, 1000, 0xAB, 1)  # the calling thread does the work
    assert dev.now() == 130 + 1000 + 1500
    done.wait(1)  # its own signal: no wake latency, only the call's cost
    assert dev.now() == 2640
    (op,) = dev.trace.operations()
    assert (op["ready"], op["start"], op["end"]) == (130, 1130, 2630)


def test_dispatch_costs_and_spin_scales_with_iterations(make):
    model = costs(dispatch_base_ns=100, dispatch_per_workgroup_ns=10,
                  kernels={"spin": {"base_ns": 7, "per_workgroup_ns": 0, "per_unit_ns": 2, "unit_constant": 0}})
    dev = make("generic", cost_model=model)
    exe = dev.load_executable()
    a = dev.allocator.allocate_buffer(64)
    b = dev.allocator.allocate_buffer(64)
    s = dev.create_semaphore()
    dev.queue_dispatch([], [(s, 1)], exe, "negate", (4, 2, 1), (), (a, b))
    dev.queue_dispatch([(s, 1)], [(s, 2)], exe, "spin", (3, 1, 1), (5000,), (a,))
    dev.queue_dispatch([(s, 2)], [(s, 3)], exe, "spin", (3, 1, 1), (10000,), (a,))
    s.wait(3)
    durations = [c["t"] - c["start"] for c in dev.trace.events("cmd")]
    assert durations == [100 + 8 * 10, 7 + 2 * 5000, 7 + 2 * 10000]
    assert a.map_read(0, 12) == (10000).to_bytes(4, "little") * 3  # the kernels really ran


def test_transfer_durations_round_up_to_whole_ns(make):
    dev = make("generic", cost_model=costs(copy_latency_ns=3, copy_gb_per_s=3, update_latency_ns=1,
                                           update_gb_per_s=0.5))
    a = dev.allocator.allocate_buffer(16)
    b = dev.allocator.allocate_buffer(16)
    s = dev.create_semaphore()
    dev.queue_update([], [(s, 1)], bytes(range(10)), 0, a, 0, 10)
    dev.queue_copy([(s, 1)], [(s, 2)], a, 0, b, 0, 10)
    s.wait(2)
    assert [c["t"] - c["start"] for c in dev.trace.events("cmd")] == [1 + 20, 3 + 4]
    assert b.map_read(0, 10) == bytes(range(10))


@pytest.mark.parametrize("concurrency, starts", [(1, [0, 1000, 2000]), (2, [0, 0, 1000]), (4, [0, 0, 0])])
def test_max_concurrency_limits_overlap_on_a_queue(make, concurrency, starts):
    # 999 ns latency + 4 bytes, which round up to 1 ns at any bandwidth: 1000 ns per fill
    dev = make("generic", max_concurrency=concurrency, cost_model=costs(fill_latency_ns=999))
    buf = dev.allocator.allocate_buffer(12)
    s = [dev.create_semaphore() for _ in range(3)]
    for i in range(3):
        dev.queue_fill([], [(s[i], 1)], buf, 4 * i, 4, i, 1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(x, 1) for x in s])
    assert [op["start"] for op in dev.trace.operations()] == starts


def test_queues_run_in_parallel(make):
    dev = make("generic", queues=2, max_concurrency=1, cost_model=costs(fill_latency_ns=999))
    buf = dev.allocator.allocate_buffer(8)
    s = dev.create_semaphore()
    t = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 4, 1, 1, queue_affinity=1 << 0)
    dev.queue_fill([], [(t, 1)], buf, 4, 4, 2, 1, queue_affinity=1 << 1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1), (t, 1)])
    ops = dev.trace.operations()
    assert [(o["queue"], o["start"], o["end"]) for o in ops] == [(0, 0, 1000), (1, 0, 1000)]
    tracks = {e["id"]: e["name"] for e in dev.trace.events("track")}
    assert [tracks[o["track"]] for o in ops] == ["queue 0", "queue 1"]


def test_finite_timeout_expires_exactly_at_the_deadline_while_work_is_pending(make):
    dev = make("generic", cost_model=costs(fill_latency_ns=10**9 - 1))
    buf = dev.allocator.allocate_buffer(4)
    s = dev.create_semaphore()
    dev.queue_fill([], [(s, 1)], buf, 0, 4, 1, 1)  # signals at t = 1 s (4 bytes round up to 1 ns)
    with pytest.raises(hal.HalError) as ei:
        s.wait(1, timeout=0.25)
    assert ei.value.code == S.DEADLINE_EXCEEDED
    assert type(ei.value) is hal.HalError  # an ordinary timeout: the fill was still coming
    assert dev.now() == 250_000_000
    s.wait(1, timeout=1)
    assert dev.now() == 10**9


def test_host_call_runs_at_its_virtual_time(make):
    dev = make("generic", cost_model=costs(host_call_latency_ns=300, launch_ns=200, submit_ns=10))
    seen = []
    done = dev.create_semaphore()
    dev.queue_host_call([], [(done, 1)], lambda args, ctx: seen.append(ctx.device.now()))
    done.wait(1)
    assert seen == [10 + 200 + 300]
    assert dev.now() == 510


def test_host_thread_clock_runs_ahead_of_the_device_until_it_blocks(make):
    dev = make("generic", cost_model=costs(host_api_ns=5))
    s = [dev.create_semaphore() for _ in range(4)]  # 4 calls
    assert dev.now() == 20 and dev.env.now == 0      # host work, nothing waited for yet
    dev.sleep(0.000001)
    assert dev.now() == dev.env.now == 1020


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "opencl"])
def test_a_wait_met_before_the_semaphore_failed_succeeds(make, personality):
    # The host thread signals and then fails g before the simulation has reached the op's wait (its
    # clock runs ahead): in virtual time the wait was met at the signal, before the failure, as on
    # local-task, so the op runs. The failure still fails what waits for g after it.
    dev = make(personality)
    g, done, late = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(16)
    dev.queue_fill([(g, 1)], [(done, 1)], buf, 0, 16, 7, 1)
    g.signal(1)  # no blocking call in between: the simulation is still behind, at the fill's arrival
    g.fail(S.ABORTED, "bad input")
    done.wait(1, timeout=10)
    assert buf.map_read() == b"\x07" * 16
    if personality == "generic":  # as local-task: the call's in-order scan meets the failure and raises it
        e = pytest.raises(hal.HalError, dev.queue_barrier, [(g, 1)], [(late, 1)]).value
        assert (e.code, e.message) == (S.ABORTED, "bad input")
    else:
        dev.queue_barrier([(g, 1)], [(late, 1)])  # a wait made after the failure fails
    e = pytest.raises(hal.HalError, late.wait, 1, timeout=10).value
    assert (e.code, e.message) == (S.ABORTED, "bad input")


POLLS = costs(host_api_ns=1000, fill_latency_ns=2500, fill_gb_per_s=1)


def test_a_poll_sees_the_device_at_the_callers_clock(make):
    """A wait with timeout 0 used to answer from wherever the simulation happened to be (it runs
    behind a host thread's clock until the thread blocks): a poll loop never saw a fill that ends at
    5.5 µs, while its thread's clock ran to 24 ms."""
    dev = make("generic", cost_model=POLLS)
    s, buf = dev.create_semaphore(), dev.allocator.allocate_buffer(4)      # clock 1000, 2000
    dev.queue_fill([], [(s, 1)], buf, 0, 4, 1, 1)                         # at 3000, ends at 5504
    outcomes = []
    for _ in range(3):
        try:
            s.wait(1, timeout=0)                                           # at 4000, 5000, 6000
            outcomes.append(("OK", dev.now(), dev.env.now))
        except hal.HalError as e:
            assert type(e) is hal.HalError  # an ordinary timeout: the fill was still coming
            outcomes.append((e.code.name, dev.now(), dev.env.now))
    assert outcomes == [("DEADLINE_EXCEEDED", 4000, 4000), ("DEADLINE_EXCEEDED", 5000, 5000),
                        ("OK", 6000, 6000)]
    assert [w["status"] for w in dev.trace.events("host_wait")] == [S.DEADLINE_EXCEEDED, S.DEADLINE_EXCEEDED, S.OK]


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "opencl", "sync"])
def test_a_poll_loop_ends_on_every_personality(make, personality):
    dev = make(personality)  # the personality's default costs
    s, buf = dev.create_semaphore(), dev.allocator.allocate_buffer(64)
    dev.queue_fill([], [(s, 1)], buf, 0, 64, 7, 1)
    for polls in range(10_000):
        try:
            dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1)], timeout=0)
            break
        except hal.HalError as e:
            assert e.code == S.DEADLINE_EXCEEDED
    else:
        pytest.fail(f"10,000 polls, clock at {dev.now()} ns: the fill never completed")
    assert dev.now() < 100_000 and buf.map_read() == b"\x07" * 64


def test_a_poll_with_nothing_pending_times_out_at_its_call_without_a_deadlock_report(make):
    dev = make("generic", cost_model=POLLS)
    s = dev.create_semaphore()
    e = pytest.raises(hal.HalError, s.wait, 1, timeout=0).value
    assert type(e) is hal.HalError and e.code == S.DEADLINE_EXCEEDED
    assert dev.now() == 2000
    dev.sleep(0.000001)  # the device still works
    assert dev.now() == 3000


def test_a_wait_met_before_its_call_pays_no_wake_latency(make):
    """Another host thread's signal that lies before the wait's call in virtual time: the wait is met
    when it is called — a poll succeeds (it used to raise DEADLINE_EXCEEDED while query() said the
    value was reached), and an untimed wait returns at its call, not wake_ns after the signal."""
    import threading
    dev = make("generic", cost_model=costs(host_api_ns=10, wake_ns=10_000))
    s, t = dev.create_semaphore(), dev.create_semaphore()
    th = threading.Thread(target=lambda: (s.signal(1), t.signal(1)))
    th.start()
    deadline = time.monotonic() + 10
    while t.query() == 0:  # (no traced hand-off: main's clock stays its own)
        assert time.monotonic() < deadline
        time.sleep(0.001)
    (sig, _) = dev.trace.events("signal")
    while dev.now() < sig["t"] + 10:  # main's clock just past the signal, well within wake_ns
        dev.create_semaphore()
    call = dev.now() + 10
    assert s.query() == 1 and sig["t"] < call < sig["t"] + 10_000
    s.wait(1, timeout=0)
    assert dev.now() == call
    t.wait(1)  # untimed: the same
    assert dev.now() == call + 10
    dev.wait_semaphores(hal.WaitMode.ANY, [(s, 1), (t, 5)], timeout=0)
    assert dev.now() == call + 20
    th.join(10)
