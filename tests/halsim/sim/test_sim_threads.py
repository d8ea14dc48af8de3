"""Several real host threads on virtual time: the classic patterns, with exact virtual times."""

import threading
import time

import pytest

from halsim.sim import DeadlockError, host
from reference import hal
from tests.conftest import WAIT, join
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
ALL, ANY = hal.WaitMode.ALL, hal.WaitMode.ANY


def start(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args)
    t.start()
    return t


def test_thread_sleeps_then_signals_while_main_waits(make, personality):
    dev = make(personality, cost_model=costs(host_api_ns=10, wake_ns=50))
    s = dev.create_semaphore()                  # main's clock: 10

    def signaller():
        dev.sleep(0.1)                          # sleeping is free; the thread starts at main's 10 + 50
        s.signal(1)                             # at 60 + 0.1 s + 10 ns

    t0 = time.perf_counter()
    t = start(signaller)
    s.wait(1, WAIT)
    assert dev.now() == 100_000_070 + 50        # the other thread's signal + wake latency
    join(t)
    assert time.perf_counter() - t0 < 1.0
    (sig,) = dev.trace.events("signal")
    assert (sig["t"], sig["cause"]) == (100_000_070, "host:1")


def test_ping_pong(make, personality):
    dev = make(personality, cost_model=costs(host_api_ns=10, wake_ns=50))
    a2b, b2a = dev.create_semaphore(), dev.create_semaphore()
    log = []

    def other():
        for i in range(1, 4):
            a2b.wait(i, WAIT)
            log.append(("b", i, dev.now()))
            b2a.signal(i)

    t = start(other)
    for i in range(1, 4):
        a2b.signal(i)
        b2a.wait(i, WAIT)
        log.append(("a", i, dev.now()))
    join(t)
    assert [entry[:2] for entry in log] == [("b", 1), ("a", 1), ("b", 2), ("a", 2), ("b", 3), ("a", 3)]
    times = [entry[2] for entry in log]
    assert times == sorted(times)
    # each hop: the signal's call (10) + wake (50), then the wait returns; the waiter's next call costs 10
    assert times[1] - times[0] == 10 + 50


def test_two_waiters_and_a_signaller(make, personality):
    dev = make(personality, cost_model=costs(wake_ns=7))
    s = dev.create_semaphore()
    woke = {}

    def waiter(value):
        s.wait(value, WAIT)
        woke[value] = dev.now()

    def signaller():
        dev.sleep(0.001)
        s.signal(1)
        dev.sleep(0.001)
        s.signal(2)

    threads = [start(waiter, 1), start(waiter, 2), start(signaller)]
    for t in threads:
        join(t)
    # the signaller starts at wake_ns (Thread.start: a started thread wakes), each waiter sees a
    # signal wake_ns after it
    assert woke == {1: 7 + 1_000_000 + 7, 2: 7 + 2_000_000 + 7}
    assert s.query() == 2


def test_threads_joined_while_the_device_finishes_their_work(make):
    """The main thread submits work and joins threads that wait for it: Thread.join does not call the
    device, so after a short real-time stall the simulator runs the work anyway."""
    dev = make("generic", cost_model=costs(fill_latency_ns=10**6))
    buf = dev.allocator.allocate_buffer(16)
    s = [dev.create_semaphore() for _ in range(3)]
    results = []
    waiters = [start(lambda sem=sem: (sem.wait(1, WAIT), results.append(sem.id))) for sem in s]
    for i, sem in enumerate(s):
        dev.queue_fill([], [(sem, 1)], buf, 4 * i, 4, i, 1)
    t0 = time.perf_counter()
    for t in waiters:
        join(t)
    assert time.perf_counter() - t0 < 2.0
    assert sorted(results) == ["s0", "s1", "s2"]


def test_a_host_call_may_hand_signalling_to_a_new_thread(make):
    """IREE's AsyncCallback: the callback returns DEFERRED and a thread it starts signals later."""
    dev = make("generic", cost_model=costs(wake_ns=5))
    done = dev.create_semaphore()

    def fn(args, ctx):
        signal = list(ctx.signal)

        def later():
            dev.sleep(0.01)
            for sem, value in signal:
                sem.signal(value)

        threading.Thread(target=later).start()
        return S.DEFERRED

    dev.queue_host_call([], [(done, 1)], fn)
    done.wait(1, WAIT)
    assert dev.now() == 5 + 10_000_000 + 5   # the thread starts at wake_ns; the waiter wakes wake_ns later


def test_a_blocking_wait_inside_a_simulated_host_call_fails_the_call(make):
    dev = make("generic")
    never, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_host_call([], [(done, 1)], lambda args, ctx: never.wait(1))
    with pytest.raises(hal.HalError) as ei:
        done.wait(1, WAIT)
    assert ei.value.code == S.FAILED_PRECONDITION and "DEFERRED" in ei.value.message


def test_sync_queue_call_blocks_until_another_thread_signals(make):
    dev = make("sync", cost_model=costs(wake_ns=3))
    w, g = dev.create_semaphore(), dev.create_semaphore()
    t = start(lambda: (dev.sleep(0.05), w.signal(1)))
    dev.queue_barrier([(w, 1)], [(g, 1)])  # blocks (virtually) until the thread signals
    assert g.query() == 1
    assert dev.now() == 3 + 50_000_000 + 3   # (the thread starts at wake_ns)
    join(t)


def test_wait_any_on_a_later_signal(make, personality):
    dev = make(personality)
    a, b = dev.create_semaphore(), dev.create_semaphore()
    t = start(lambda: (dev.sleep(0.1), b.signal(1)))
    dev.wait_semaphores(ANY, [(a, 1), (b, 1)], WAIT)
    join(t)
    assert (a.query(), b.query()) == (0, 1)


def test_wait_then_fail_from_another_thread(make, personality):
    dev = make(personality)
    s = dev.create_semaphore()
    t = start(lambda: (dev.sleep(0.01), s.fail(S.CANCELLED, "WaitThenFail test.")))
    with pytest.raises(hal.HalError) as ei:
        s.wait(1, WAIT)
    assert (ei.value.code, ei.value.message) == (S.CANCELLED, "WaitThenFail test.")
    join(t)


def test_a_dead_thread_does_not_hold_back_virtual_time(make):
    dev = make("generic")
    t = start(lambda: dev.create_semaphore())  # registers, then exits
    join(t)
    t0 = time.perf_counter()
    dev.sleep(10)
    assert time.perf_counter() - t0 < 0.5


def test_an_unrelated_new_thread_holds_back_time_only_for_the_grace_period(make, monkeypatch):
    monkeypatch.setattr(host, "GRACE_S", 0.2)
    dev = make("generic")
    stop = threading.Event()
    bystander = start(stop.wait, WAIT)  # never calls the device
    try:
        t0 = time.perf_counter()
        dev.sleep(1)
        elapsed = time.perf_counter() - t0
        assert 0.15 < elapsed < 2.0
        assert dev.now() >= 10**9
    finally:
        stop.set()
        join(bystander)


def test_a_thread_blocked_in_a_queue_call_is_released_by_a_host_signal(make):
    """IREE's EnqueueBeforeSignal on sim:sync: the submitter blocks in queue_host_call until the main
    thread signals its wait; the callback then runs on the submitter's thread."""
    dev = make("sync")
    w, g, started = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    ran_on = []

    def submitter():
        started.signal(1)
        dev.queue_host_call([(w, 1)], [(g, 1)], lambda args, ctx: ran_on.append(threading.current_thread()))

    t = start(submitter)
    started.wait(1, WAIT)
    assert not ran_on
    w.signal(1)
    join(t)
    assert ran_on == [t] and g.query() == 1


def test_thread_indices_follow_start_order_not_a_race(make):
    dev = make("generic")
    s = dev.create_semaphore()                  # main is host thread 0
    indices = {}

    def worker(name, delay):
        time.sleep(delay)                       # real time: the later-started thread is first to call
        s.wait(0, WAIT)
        indices[name] = dev.host_thread()

    threads = [start(worker, "a", 0.05), start(worker, "b", 0.02), start(worker, "c", 0.0)]
    for t in threads:
        join(t)
    assert indices == {"a": 1, "b": 2, "c": 3}


def test_workers_deadlocked_while_main_joins_them_get_the_report(make, personality):
    """A thread in Thread.join on threads blocked in the device is blocked too: their deadlock is
    reported (and deadlines expire) rather than held back as if the joiner might still signal.
    Before, the main thread here was only "stalled" and the program hung."""
    dev = make(personality)
    a, b = dev.create_semaphore(), dev.create_semaphore()  # the main thread registers
    errors = {}

    def worker(name, mine, other):
        try:
            dev.queue_barrier([(other, 1)], [(mine, 1)])
            mine.wait(1)  # no timeout: only the deadlock report can end it
        except hal.HalError as e:
            errors[name] = e

    workers = [start(worker, "a", a, b), start(worker, "b", b, a)]
    t0 = time.perf_counter()
    for t in workers:
        join(t, 5.0)
    assert time.perf_counter() - t0 < 5.0
    assert sorted(errors) == ["a", "b"]
    for e in errors.values():
        assert isinstance(e, DeadlockError) and e.code == S.ABORTED
        assert [c.ops for c in e.report.cycles] == [("1:0", "2:0")]


def test_a_join_on_a_joiner_of_deadlocked_threads_counts_as_blocked_too(make):
    """main joins a registered thread that joins the deadlocked workers: the deadlock's deadline
    (a finite timeout) expires in virtual time, at once in real time."""
    dev = make("generic")
    a, b = dev.create_semaphore(), dev.create_semaphore()
    codes = []

    def worker(mine, other):
        dev.queue_barrier([(other, 1)], [(mine, 1)])
        try:
            mine.wait(1, 0.5)
        except hal.HalError as e:
            codes.append(e.code)

    def supervisor():
        dev.sleep(0)  # registers: from now on it holds time back unless blocked
        workers = [start(worker, a, b), start(worker, b, a)]
        for t in workers:
            join(t, 5.0)

    t0 = time.perf_counter()
    join(start(supervisor), 5.0)
    assert time.perf_counter() - t0 < 5.0
    assert codes == [S.DEADLINE_EXCEEDED, S.DEADLINE_EXCEEDED]
    assert dev.now() >= 500_000_000


@pytest.mark.parametrize("how", ["result", "exception"])
def test_a_future_waited_on_a_deadlocked_pool_worker_counts_as_blocked(make, how):
    """Future.result/exception on a ThreadPoolExecutor work item whose thread is blocked in the device
    is recognised as Thread.join is: the workers' deadlock is reported instead of the program hanging."""
    from concurrent.futures import ThreadPoolExecutor

    def outcome(future):
        if how == "exception":
            return future.exception(timeout=5.0)
        try:
            future.result(timeout=5.0)
        except hal.HalError as e:
            return e

    dev = make("generic")
    a, b = dev.create_semaphore(), dev.create_semaphore()  # the main thread registers

    def worker(mine, other):
        dev.queue_barrier([(other, 1)], [(mine, 1)])
        mine.wait(1)  # no timeout: only the deadlock report can end it

    t0 = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(worker, a, b), pool.submit(worker, b, a)]
        errors = [outcome(f) for f in futures]
    assert time.perf_counter() - t0 < 5.0
    assert [type(e) for e in errors] == [DeadlockError, DeadlockError]
    assert [e.code for e in errors] == [S.ABORTED, S.ABORTED]


def test_a_host_call_joining_a_thread_that_calls_the_device_fails_instead_of_hanging(make):
    """The simulator runs the host call holding the device: a thread it starts cannot make a device
    call until it returns, so joining one that tries would never return (local-task runs it). The
    join raises FAILED_PRECONDITION instead, failing the call's signals, and the thread goes on after."""
    dev = make("generic")
    s, done = dev.create_semaphore(), dev.create_semaphore()
    started = []

    def fn(args, ctx):
        t = threading.Thread(target=lambda: s.signal(1), name="signaller")
        started.append(t)
        t.start()
        t.join()

    dev.queue_host_call([], [(done, 1)], fn)
    t0 = time.perf_counter()
    with pytest.raises(hal.HalError) as ei:
        done.wait(1, WAIT)
    assert time.perf_counter() - t0 < 5.0
    assert ei.value.code == S.FAILED_PRECONDITION
    assert "joined thread 'signaller', which waits for the device" in ei.value.message
    s.wait(1, WAIT)  # the thread signalled once the host call had returned
    join(started[0])


def test_a_host_call_may_join_a_thread_that_only_computes(make):
    dev = make("generic")
    done = dev.create_semaphore()
    out = []

    def fn(args, ctx):
        t = threading.Thread(target=lambda: out.append(sum(range(1000))))
        t.start()
        t.join()

    dev.queue_host_call([], [(done, 1)], fn)
    done.wait(1, WAIT)
    assert out == [499500]


def test_a_sim_sync_host_call_may_join_a_thread_that_calls_the_device(make):
    """On sim:sync the host call runs on the calling thread inside its queue call, like local-sync:
    the device lock is released meanwhile, so a thread it starts and joins can signal (it hung)."""
    dev = make("sync")
    s, done = dev.create_semaphore(), dev.create_semaphore()
    seen = []

    def fn(args, ctx):
        t = threading.Thread(target=lambda: s.signal(1))
        t.start()
        t.join()
        seen.append(s.query())

    def program():
        dev.queue_host_call([], [(done, 1)], fn)
        return done.query()

    out = []
    runner = start(lambda: out.append(program()))
    runner.join(WAIT)
    assert not runner.is_alive(), "the host call hung"
    assert out == [1] and seen == [1]
    assert [e["cause"] for e in dev.trace.events("signal") if e["sem"] == s.id] == ["host:2"]
