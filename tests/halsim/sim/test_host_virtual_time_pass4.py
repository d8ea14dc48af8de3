"""Host threads on virtual time, adversarial pass 4 (/tmp/bughunt4/host): a watchdog polling a Python
``Event`` with a real-time timeout, clocks across Python hand-offs, ``wait_semaphores(ANY)`` decided in
virtual-time order, ``close()`` and the deadlines of blocked waits, and the ``sim:sync`` report of a
host call that waits on itself. Exact virtual times (ns) and status codes; every wait is bounded."""

import queue
import threading
import time

import pytest

from halsim.sim import DeadlockError
from reference import hal
from tests.conftest import WAIT, join
from tests.halsim.sim.conftest import costs

S = hal.StatusCode
ANY = hal.WaitMode.ANY


def start(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args)
    t.start()
    return t


# -- bug01: a Python wait with a real-time timeout is a virtual sleep of that length ---------------

def test_a_timed_wait_expires_beside_a_watchdog_polling_an_event(make):
    """A heartbeat thread in ``while not stop.wait(0.05)`` used to keep every deadline from expiring:
    the semaphore wait nobody signals never returned (local-task: DEADLINE_EXCEEDED after 0.3 s)."""
    dev = make("generic", cost_model=costs(host_api_ns=10, wake_ns=50))
    s = dev.create_semaphore()                      # main: 10
    stop = threading.Event()

    def watchdog():
        dev.create_semaphore()                      # starts at 10 + 50, its call: 70
        while not stop.wait(0.05):
            pass

    t = start(watchdog)
    got = []

    def waiter():                                   # starts at main's 10 + 50
        try:
            s.wait(1, 0.3)                          # called at 70: deadline 300_000_070
        except hal.HalError as e:
            got.append(e)
        got.append(dev.now())

    try:
        w = start(waiter)
        w.join(WAIT)
        assert not w.is_alive(), "the timed wait never expired beside the watchdog"
    finally:
        stop.set()
        join(t)
    err, now = got
    assert type(err) is hal.HalError and err.code == S.DEADLINE_EXCEEDED  # a timeout, no deadlock
    assert now == 300_000_070
    (w_ev,) = dev.trace.events("host_wait")
    assert (w_ev["thread"], w_ev["start"], w_ev["t"], w_ev["status"]) == (2, 70, 300_000_070, S.DEADLINE_EXCEEDED)


def test_a_deadline_before_a_long_timed_python_wait_ends_expires_at_once(make):
    """A thread in ``ev.wait(WAIT)`` cannot act before WAIT seconds of virtual time: a 10 ms deadline
    expires at once (it used to wait for the whole real-time timeout)."""
    dev = make("generic", cost_model=costs(host_api_ns=10, wake_ns=50))
    s = dev.create_semaphore()                      # main: 10
    ev, entered = threading.Event(), threading.Event()

    def sleeper():
        dev.create_semaphore()                      # starts at 10 + 50, its call: 70
        entered.set()                               # main acquires it: 70 + 50 = 120
        ev.wait(WAIT)

    t = start(sleeper)
    got = []

    def waiter():                                   # starts at 120 + 50
        t0 = time.monotonic()
        try:
            s.wait(1, 0.01)                         # called at 180
        except hal.HalError as e:
            got.append(e)
        got.extend((dev.now(), time.monotonic() - t0))

    try:
        assert entered.wait(WAIT)
        w = start(waiter)
        w.join(WAIT - 2)
        assert not w.is_alive(), "the deadline waited for the other thread's real-time timeout"
    finally:
        ev.set()
        join(t)
    err, now, real = got
    assert type(err) is hal.HalError and err.code == S.DEADLINE_EXCEEDED
    assert now == 10_000_180
    assert real < 2.0


def test_a_watchdog_still_meets_a_wait_whose_deadline_comes_after_its_timed_wait(make):
    """Deadlines before the watchdog's wait ends expire (plain DEADLINE_EXCEEDED, not a deadlock
    report); one after it waits for the watchdog, whose signal after its wait meets it."""
    dev = make("generic", cost_model=costs(host_api_ns=10, wake_ns=50))
    early, late = dev.create_semaphore(), dev.create_semaphore()   # main: 20
    ev = threading.Event()

    def watchdog():
        dev.create_semaphore()                      # starts at 20 + 50: 80
        ev.wait(0.2)                                # ends at 200_000_080 in virtual time
        # Its clock stood at 80; the simulation went on to main's expired deadline, 10_000_030:
        late.signal(1)                              # at 10_000_040

    t = start(watchdog)
    try:
        err = pytest.raises(hal.HalError, early.wait, 1, 0.01).value   # called at 30
        assert type(err) is hal.HalError and err.code == S.DEADLINE_EXCEEDED
        assert dev.now() == 10_000_030
        late.wait(1, 5.0)                           # called at 10_000_040, before the signal in real time
        assert dev.now() == 10_000_040              # the signal is no later in virtual time: no wake
    finally:
        ev.set()
        join(t)
    assert [(e["t"], e["cause"]) for e in dev.trace.events("signal")] == [(10_000_040, "host:1")]


# -- bug02: a thread's clock stands still while it waits in Python ---------------------------------

HANDOFF = costs(host_api_ns=10, wake_ns=50)


def test_join_and_queue_get_move_the_receiver_to_the_givers_clock_plus_wake(make):
    dev = make("generic", cost_model=HANDOFF)
    r = {}
    for _ in range(100):
        dev.create_semaphore()                      # main: 1000, the simulation still at 0

    def child():
        dev.create_semaphore()                      # starts at 1000 + 50: 1060
        dev.sleep(1e-3)
        r["end"] = dev.now()

    t = start(child)
    join(t)
    assert (r["end"], dev.now()) == (1_001_060, 1_001_110)     # was 1_002_060: main's 1000 counted again
    q = queue.Queue()
    for _ in range(100):
        dev.create_semaphore()                      # main: 1_002_110

    def worker():
        dev.create_semaphore()
        dev.sleep(1e-3)
        r["put"] = dev.now()
        q.put(1)

    t2 = start(worker)
    assert q.get(timeout=WAIT) == 1
    assert (r["put"], dev.now()) == (2_002_170, 2_002_220)     # was 2_004_170
    join(t2)
    joined = [(e["thread"], e["joined"], e["t"]) for e in dev.trace.events("host_join")]
    assert joined == [(0, 1, 1_001_110), (0, 2, 2_002_220)]


def test_event_wait_and_an_untraced_condition_leave_the_waiters_clock_where_it_stood(make):
    dev = make("generic", cost_model=HANDOFF)
    r = {}
    for _ in range(100):
        dev.create_semaphore()                      # main: 1000
    ev = threading.Event()

    def setter():
        dev.create_semaphore()
        dev.sleep(1e-3)
        r["set"] = dev.now()
        ev.set()

    t = start(setter)
    assert ev.wait(WAIT)
    assert (r["set"], dev.now()) == (1_001_060, 1_001_110)     # was 1_002_060
    join(t)
    for _ in range(100):
        dev.create_semaphore()                      # main: 1_002_110 (the simulation at 1_001_060)
    cond, ready = threading.Condition(), []

    def notifier():                                 # starts at 1_002_110 + 50, its call: 1_002_170
        dev.create_semaphore()
        dev.sleep(1e-3)                             # the simulation reaches 2_002_170
        with cond:
            ready.append(1)
            cond.notify()                           # not a traced hand-off: main's clock is its own
        dev.sleep(1e-3)

    t2 = start(notifier)
    with cond:
        assert cond.wait_for(lambda: ready, WAIT)
    # main waited from 1_002_110: its clock is the simulator's time now (was that + its 1050 ns lag)
    assert (dev.now(), dev.env.now) == (2_002_170, 2_002_170)
    dev.create_semaphore()
    assert dev.now() == 2_002_180
    join(t2)


# -- bug03: wait_semaphores(ANY) in virtual-time order ----------------------------------------------

AHEAD = costs(host_api_ns=1000, wake_ns=50, fill_latency_ns=5000)


def _any_wait_against_a_thread_running_ahead(dev, timeout, fail: bool):
    """B runs 100 µs of host work ahead of the simulation, then signals (or fails) ``sh``; the device
    signals ``sd`` at 10_001. Main waits ANY of both from 6000."""
    buf = dev.allocator.allocate_buffer(4096)                       # main: 1000
    sd, sh, go = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()  # 4000

    def b():
        go.wait(1, WAIT)
        for _ in range(100):
            dev.create_semaphore()
        if fail:
            sh.fail(S.DATA_LOSS, "ahead")           # at 107_050
        else:
            sh.signal(1)                            # at 107_050

    t = start(b)
    dev.queue_fill([], [(sd, 1)], buf, 0, 4096, 1, 1)  # enqueued at 5000, signals sd at 10_001
    go.signal(1)                                    # 6000
    try:
        dev.wait_semaphores(ANY, [(sd, 1), (sh, 1)], timeout)   # called at 7000
        res = S.OK
    except hal.HalError as e:
        res = e.code
    now = dev.now()
    join(t)
    return res, now, sd, sh


@pytest.mark.parametrize("timeout", [50e-6, WAIT])
def test_wait_any_takes_the_device_signal_that_comes_first_in_virtual_time(make, timeout):
    dev = make("generic", cost_model=AHEAD)
    res, now, sd, sh = _any_wait_against_a_thread_running_ahead(dev, timeout, fail=False)
    assert (res, now) == (S.OK, 10_051)             # sd at 10_001 + wake (was DEADLINE_EXCEEDED at
    sigs = {e["sem"]: e["t"] for e in dev.trace.events("signal")}   # 57_000, or OK at 107_100)
    assert (sigs[sd.id], sigs[sh.id]) == (10_001, 107_050)
    (w,) = [e for e in dev.trace.events("host_wait") if e["mode"] == "any"]
    assert (w["start"], w["t"], w["status"]) == (7000, 10_051, S.OK)


def test_wait_any_a_failure_ahead_does_not_beat_an_earlier_device_signal(make):
    dev = make("generic", cost_model=AHEAD)
    res, now, _, sh = _any_wait_against_a_thread_running_ahead(dev, 50e-6, fail=True)
    assert (res, now) == (S.OK, 10_051)             # was DATA_LOSS (the failure at 107_050)
    assert [(e["sem"], e["t"]) for e in dev.trace.events("fail")] == [(sh.id, 107_050)]


# -- bug04: close() and the deadlines of blocked waits ----------------------------------------------

def test_close_times_out_a_blocked_wait_at_its_deadline_and_cancels_the_others_at_the_end(make):
    dev = make("generic", cost_model=costs())
    s = dev.create_semaphore()
    r = {}

    def waiter(name, timeout):
        try:
            s.wait(1, timeout)
            r[name] = (S.OK, dev.now())
        except hal.HalError as e:
            r[name] = (e.code, dev.now())

    threads = [start(dev.sleep, 10.0), start(waiter, "timed", 5.0), start(waiter, "untimed", None),
               start(waiter, "later", 20.0)]
    dev.sleep(1e-3)
    dev.close()                                     # at 1 ms; the sleeper's sleep runs to 10 s
    for t in threads:
        join(t)
    assert r == {"timed": (S.DEADLINE_EXCEEDED, 5_000_000_000),   # was CANCELLED at 10 s
                 "untimed": (S.CANCELLED, 10_000_000_000), "later": (S.CANCELLED, 10_000_000_000)}
    waits = sorted((e["thread"], e["t"], e["status"]) for e in dev.trace.events("host_wait"))
    assert waits == [(2, 5_000_000_000, S.DEADLINE_EXCEEDED), (3, 10_000_000_000, S.CANCELLED),
                     (4, 10_000_000_000, S.CANCELLED)]


def test_close_by_a_thread_ahead_times_out_the_waits_due_before_it(make):
    dev = make("generic", cost_model=costs(host_api_ns=1_000_000_000))
    s = dev.create_semaphore()                      # main: 1 s
    r = {}

    def waiter():
        try:
            s.wait(1, 2.0)                          # starts at 1 s, called at 2 s: deadline 4 s
            r["w"] = (S.OK, dev.now())
        except hal.HalError as e:
            r["w"] = (e.code, dev.now())

    t = start(waiter)
    deadline = time.monotonic() + WAIT
    while not dev.threads.is_blocked(t):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    for _ in range(5):
        dev.create_semaphore()                      # main: 6 s, the simulation still at 0
    dev.close()
    join(t)
    assert r["w"] == (S.DEADLINE_EXCEEDED, 4_000_000_000)          # was CANCELLED at 2 s


# -- bug05: sim:sync, a host call's function waiting for its own op's signal ------------------------

def test_sim_sync_report_names_the_running_host_call_a_thread_waits_on(make):
    dev = make("sync", cost_model=costs(host_api_ns=100, submit_ns=1000))
    b = dev.create_semaphore()                      # 100
    out = {}

    def fn(args, ctx):
        try:
            b.wait(1, 1.0)                          # at 100 + 1100 (a call inside a call costs nothing)
        except DeadlockError as e:
            out["e"] = e

    dev.queue_host_call([], [(b, 1)], fn)
    e = out["e"]
    assert (type(e), e.code) == (DeadlockError, S.DEADLINE_EXCEEDED)
    (thread,) = e.report.threads
    assert (thread.thread, thread.inside, thread.deadline) == (0, "0:0", 1_000_001_200)
    assert (thread.waits[0].signalers, thread.waits[0].running) == (("0:0",), (("0:0", 0),))
    assert e.report.unsignaled == ()                # was "no pending operation or host thread signals s0"
    assert e.message.splitlines()[1:] == [
        "deadlock at t=1200 ns: every host thread is blocked and no simulated work is pending",
        "  host thread 0 blocked in wait_semaphores(all) inside host call op 0:0 waiting for s0>=1 (now 0), "
        "deadline t=1000001200 ns",
        "    s0>=1 would be signaled by op 0:0 (the host call running on host thread 0, blocked in its "
        "function) only when that function returns",
        "    host thread 0 waits on itself: op 0:0 signals only when the function waiting here returns"]
    assert (b.query(), dev.now()) == (1, 1_000_001_200)    # the host call returned: its op signaled
