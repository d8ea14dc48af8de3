"""Host threads idle in Python's own waits (Queue.get, Event.wait, an idle pool worker...) on virtual
time: they count as blocked, so deadlines expire and deadlocks are reported instead of the program
hanging — but only where nothing outside the simulation could wake them, and never for a wait with a
real-time timeout."""

import inspect
import queue
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from halsim.sim import DeadlockError
from reference import hal
from tests.conftest import WAIT, join
from tests.halsim.sim.conftest import costs

S = hal.StatusCode


def start(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args)
    t.start()
    return t


def handoffs(dev) -> list:
    """The trace's host_sync events other than Thread.start's (every started thread has one)."""
    return [e for e in dev.trace.events("host_sync") if e["via"] != "Thread.start"]


def idle_in(kind: str, dev, release: list):
    """A registered host thread that then waits in ``kind`` until ``release[0]()`` is called."""
    if kind == "pool":
        pool = ThreadPoolExecutor(1)
        pool.submit(dev.sleep, 0).result(WAIT)  # its worker registers, then idles on its work queue
        release.append(lambda: pool.shutdown(wait=True))
        return None
    q, ev, sem, fut = queue.Queue(), threading.Event(), threading.Semaphore(0), Future()
    wait = {"queue": q.get, "event": ev.wait, "semaphore": sem.acquire, "future": fut.result}[kind]
    wake = {"queue": lambda: q.put(None), "event": ev.set, "semaphore": sem.release,
            "future": lambda: fut.set_result(None)}[kind]

    def worker():
        dev.sleep(0)
        wait()

    t = start(worker)
    release.append(lambda: (wake(), join(t)))
    return t


def in_thread(fn):
    """Run ``fn`` on a new thread and return what it returned or raised, failing after WAIT seconds
    instead of hanging (which is what the simulator used to do)."""
    out = []
    t = start(lambda: out.append(_outcome(fn)))
    t.join(WAIT)
    assert not t.is_alive(), "the simulated program hung"
    return out[0]


def _outcome(fn):
    try:
        return fn()
    except hal.HalError as e:
        return e


@pytest.mark.parametrize("kind", ["queue", "event", "semaphore", "future", "pool"])
def test_a_deadline_expires_while_a_worker_idles_in_a_python_wait(make, kind):
    dev = make("generic", cost_model=costs())
    s = dev.create_semaphore()
    release = []
    try:
        idle_in(kind, dev, release)
        t0 = time.perf_counter()
        err = in_thread(lambda: s.wait(1, 0.5))
        assert time.perf_counter() - t0 < 5.0
    finally:
        release[0]()
    assert isinstance(err, DeadlockError) and err.code == S.DEADLINE_EXCEEDED
    assert dev.now() == 500_000_000


@pytest.mark.parametrize("personality", ["generic", "metal", "cuda", "sync", "opencl"])
def test_on_every_personality(make, personality):
    dev = make(personality)
    s = dev.create_semaphore()
    release = []
    try:
        idle_in("queue", dev, release)
        err = in_thread(lambda: s.wait(1, 0.25))
    finally:
        release[0]()
    assert isinstance(err, hal.HalError) and err.code == S.DEADLINE_EXCEEDED
    assert dev.now() >= 250_000_000


def test_a_deadlock_behind_a_worker_in_queue_get_is_reported_with_where_it_waits(make):
    dev = make("generic")
    a, b = dev.create_semaphore(), dev.create_semaphore()
    q, line = queue.Queue(), []

    def worker():
        dev.queue_barrier([(b, 1)], [(a, 1)])
        line.append(sys._getframe().f_lineno + 1)
        q.get()

    def main():
        dev.queue_barrier([(a, 1)], [(b, 1)])
        b.wait(1)  # no timeout: only the deadlock report ends it

    t = start(worker)
    try:
        err = in_thread(main)
    finally:
        q.put(None)
        join(t)
    assert isinstance(err, DeadlockError) and err.code == S.ABORTED
    assert len(err.report.cycles) == 1
    # main (thread 0) is in in_thread's join of the thread running main()
    lines, first = inspect.getsourcelines(in_thread)
    join_line = first + next(i for i, text in enumerate(lines) if "t.join(WAIT)" in text)
    assert err.report.host_waits == ((0, f"Thread.join at test_sim_host_waits.py:{join_line}"),
                                     (1, f"Queue.get at test_sim_host_waits.py:{line[0]}"))
    assert f"host thread 1 waits in Queue.get at test_sim_host_waits.py:{line[0]}, for another host " \
           "thread" in err.message


def test_a_thread_woken_by_a_put_holds_time_back_until_it_signals(make):
    """Notified but not yet running, a waiting thread must count as running: the put's thread then
    waits with a short deadline that only the woken thread's signal meets."""
    dev = make("generic")
    s = dev.create_semaphore()
    q = queue.Queue()

    def worker():
        dev.sleep(0)
        while (v := q.get()) is not None:
            s.signal(v)

    t = start(worker)
    try:
        def main():
            for v in range(1, 21):
                dev.sleep(0.01)  # the worker is idle in q.get by now (virtual time waited for it)
                q.put(v)
                s.wait(v, 0.001)
            return s.query()
        assert in_thread(main) == 20
    finally:
        q.put(None)
        join(t)


def test_a_python_wait_with_a_real_timeout_does_not_count_as_blocked(make):
    """A watchdog waiting 0.2 s of real time and then signalling must not see the device wait it
    would end reported as a deadlock first."""
    dev = make("generic")
    s = dev.create_semaphore()
    ev = threading.Event()

    def watchdog():
        dev.sleep(0)
        ev.wait(0.2)
        s.signal(1)

    t = start(watchdog)
    try:
        assert in_thread(lambda: s.wait(1)) is None
    finally:
        join(t)
    assert s.query() == 1


def test_an_outside_thread_that_may_wake_a_waiting_thread_keeps_it_unblocked(make):
    """A thread the simulator does not hold (started before the device, never calling it) puts work
    into a host thread's queue after 0.2 s of real time: until then the host thread must not count
    as blocked, or main's wait would be reported as a deadlock."""
    q = queue.Queue()
    feeder = start(lambda: (time.sleep(0.2), q.put(1)))
    dev = make("generic")
    s = dev.create_semaphore()

    def consumer():
        dev.sleep(0)
        s.signal(q.get())

    t = start(consumer)
    try:
        assert in_thread(lambda: s.wait(1)) is None
    finally:
        join(feeder)
        join(t)
    assert s.query() == 1


def test_a_new_thread_idle_in_queue_get_does_not_hold_time_back_for_its_grace_period(make):
    """Pool workers started but never given work have not called the device: they used to count
    as "about to" for 2 s of real time (GRACE_S) even while idle in Queue.get."""
    dev = make("generic", cost_model=costs())
    q = queue.Queue()
    workers = [start(q.get) for _ in range(3)]
    try:
        t0 = time.perf_counter()
        assert in_thread(lambda: dev.sleep(0.001)) is None
        assert time.perf_counter() - t0 < 1.0  # GRACE_S is 2.0
    finally:
        for t in workers:
            q.put(None)
            join(t)
    assert dev.now() == 1_000_000


def test_a_thread_handed_work_through_a_queue_acts_after_the_put_in_virtual_time(make):
    """The receiver's clock moves to the put's (plus the wake latency: it had been waiting); its
    submission used to be traced 18 µs before the put that caused it."""
    dev = make("generic", cost_model=costs(host_api_ns=1000, wake_ns=50))
    q, buf, s = queue.Queue(), dev.allocator.allocate_buffer(64), dev.create_semaphore()

    def worker():
        dev.sleep(0)
        dev.queue_fill([], [(s, 1)], buf, 0, 64, q.get(), 1)

    t = start(worker)
    for _ in range(20):
        dev.create_semaphore()  # main's clock runs ahead: 20 µs of host work
    put_at = dev.now()
    q.put(7)
    s.wait(1, WAIT)
    join(t)
    (release, acquire) = handoffs(dev)
    (fill,) = dev.trace.events("op")
    assert (release["t"], release["thread"], acquire["thread"]) == (put_at, 0, 1)
    assert acquire["t"] == put_at + 50
    assert fill["t"] == acquire["t"] + 1000  # (the fill's enqueue, after its host cost)


def test_an_item_already_waiting_costs_the_receiver_no_wake_and_no_clock_move(make):
    dev = make("generic", cost_model=costs(host_api_ns=1000, wake_ns=50))
    q = queue.Queue()
    q.put(1)  # by main at its clock (its first call comes later: not traced)
    dev.create_semaphore()
    q.put(2)  # release at 1000

    def worker():  # started at main's 1000 (+50 to wake it)
        for _ in range(5):
            dev.create_semaphore()  # the worker's clock: 6050, past the release
        q.get(), q.get()

    join(start(worker))
    assert [(e["role"], e["t"]) for e in handoffs(dev)] == [("release", 1000), ("acquire", 6050)]


def test_a_joiner_acts_after_the_joined_thread_ended_in_virtual_time(make):
    dev = make("generic", cost_model=costs(host_api_ns=1000, wake_ns=50))
    end = []

    def worker():
        for _ in range(20):
            dev.create_semaphore()
        end.append(dev.now())

    dev.create_semaphore()
    t = start(worker)  # at main's 1000: the worker starts at 1050
    t.join(WAIT)
    s = dev.create_semaphore()
    (joined,) = dev.trace.events("host_join")
    assert joined["t"] == end[0] + 50 and end[0] == 1050 + 20_000
    assert dev.now() == end[0] + 50 + 1000 and s is not None


def test_a_traced_put_never_waits_long_for_a_device_held_elsewhere(make, monkeypatch):
    """A put made while a host call the simulator runs holds the device (and perhaps waits for a lock
    the putter holds) is traced without the device lock after SYNC_LOCK_S, instead of hanging."""
    from halsim.sim import device as sim_device

    monkeypatch.setattr(sim_device, "SYNC_LOCK_S", 0.05)
    dev = make("generic")
    dev.create_semaphore()
    held, release = threading.Event(), threading.Event()

    def holder():  # stands for the simulator running a host call
        with dev._lock:
            held.set()
            release.wait(WAIT)

    t = start(holder)
    try:
        assert held.wait(WAIT)
        t0 = time.perf_counter()
        queue.Queue().put(1)
        assert time.perf_counter() - t0 < 2.0
    finally:
        release.set()
        join(t)
    assert [(e["role"], e["via"]) for e in handoffs(dev)] == [
        ("release", "Queue.put"), ("release", "Event.set")]  # (the put, then main's release.set())


def test_a_notified_waiter_that_took_its_wake_up_still_reads_as_waking():
    """Woken, ``Condition.wait`` holds its waiter lock again (``gotit``) while it takes back the
    condition's own lock — still held here by the notifier: that is WAKING, not a wait."""
    from halsim.sim.host_waits import CONDITION, WAKING, host_wait

    cond = threading.Condition()

    def waiter():
        with cond:
            cond.wait()

    t = start(waiter)

    def state():
        return host_wait(sys._current_frames().get(t.ident), {}, ())

    deadline = time.monotonic() + WAIT
    while state() != (CONDITION, None):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    with cond:
        cond.notify()
        while not sys._current_frames()[t.ident].f_locals.get("gotit"):  # it took its wake-up
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert state() == (WAKING, None)
    join(t)


def test_a_timed_python_wait_reads_as_timed_and_the_simulators_own_waits_as_nothing(make):
    from halsim.sim.host_waits import TIMED, host_wait

    dev = make("generic")
    s = dev.create_semaphore()
    ev = threading.Event()
    blocked = start(lambda: s.wait(1))  # blocks in the device: the simulator's own timed poll
    timed = start(lambda: ev.wait(30))

    def state(t):
        return host_wait(sys._current_frames().get(t.ident), {}, ())

    deadline = time.monotonic() + WAIT
    while state(timed) != (TIMED, None) or not dev.threads.is_blocked(blocked):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert state(blocked) is None
    ev.set()
    s.signal(1)
    join(timed)
    join(blocked)


def test_a_thread_in_a_timed_python_wait_does_not_hold_time_back_for_the_stall_period(make):
    """Main waits for each result with a real-time timeout, then acknowledges it on the device: that
    wait counts as stalled at once (it used to hold time back for STALL_S, 100 ms, per item)."""
    dev = make("generic")
    results = queue.Queue()
    sems = [dev.create_semaphore() for _ in range(10)]
    ack = dev.create_semaphore()

    def worker():
        for i, s in enumerate(sems):
            dev.queue_barrier([], [(s, 1)])
            s.wait(1)  # (virtual time must advance: main is in its timed get)
            results.put(i)
            ack.wait(i + 1)

    start_t = time.monotonic()
    t = start(worker)
    for i in range(len(sems)):
        assert results.get(timeout=WAIT) == i
        ack.signal(i + 1)
    join(t)
    assert time.monotonic() - start_t < 0.5  # (10 × STALL_S before)


def outside_threads(kinds):
    """Threads started before the device that never call it: idle in a Python wait ("idle": a
    logging QueueListener-style Queue.get) or ticking in time.sleep ("ticking"). Returns stop()."""
    q, stop_ticking, threads = queue.Queue(), threading.Event(), []
    for kind in kinds:
        if kind == "idle":
            threads.append(start(q.get))
        else:
            def tick():
                while not stop_ticking.is_set():
                    time.sleep(0.02)
            threads.append(start(tick))

    def stop():
        stop_ticking.set()
        for t in threads:
            if t.is_alive():
                q.put(None)
            join(t)
    return stop


@pytest.mark.parametrize("personality", ["generic", "cuda"])
def test_an_idle_outside_thread_and_a_ticking_one_do_not_freeze_deadlines(make, personality):
    """An idle QueueListener-like thread plus a monitor ticking in time.sleep (neither ever calling the
    device): the idle one's Python wait used to count as a host thread's, which the ticking one might
    end, so the wait counted as stalled and its deadline never expired (for ever)."""
    stop = outside_threads(["idle", "ticking"])
    try:
        time.sleep(0.05)  # both started well before the device, and settled
        dev = make(personality)
        s = dev.create_semaphore()
        t0 = time.monotonic()
        err = in_thread(lambda: s.wait(1, 0.25))
        assert time.monotonic() - t0 < 2.0
    finally:
        stop()
    assert isinstance(err, hal.HalError) and err.code == S.DEADLINE_EXCEEDED


def test_a_ticking_outside_thread_holds_a_host_threads_python_wait_back_only_for_the_grace_period(make, monkeypatch):
    """A host thread idle in Queue.get that an outside thread might feed counts as running — for
    GRACE_S of real time after its last device call, then as blocked: the deadline expires."""
    from halsim.sim import host
    monkeypatch.setattr(host, "GRACE_S", 0.5)
    stop = outside_threads(["ticking"])
    release = []
    try:
        dev = make("generic", cost_model=costs())
        s = dev.create_semaphore()
        idle_in("queue", dev, release)
        t0 = time.monotonic()
        err = in_thread(lambda: s.wait(1, 0.25))
        waited = time.monotonic() - t0
    finally:
        if release:
            release[0]()
        stop()
    assert isinstance(err, DeadlockError) and err.code == S.DEADLINE_EXCEEDED
    assert dev.now() >= 250_000_000
    assert 0.3 < waited < 5.0  # held back (a while: the ticking thread might have fed the queue), not for ever


def test_a_poll_does_not_wait_for_a_host_thread_that_computes(make):
    """A poll (timeout 0) runs the device up to its caller's clock, but — unlike a wait with a real
    deadline — does not wait for a stalled host thread (one computing without device calls) that
    might still signal: it answers once that thread counts as stalled (STALL_S)."""
    dev = make("generic", cost_model=costs(host_api_ns=1000))
    s = dev.create_semaphore()
    done, spinning = threading.Event(), threading.Event()

    def worker():
        dev.sleep(0)
        spinning.set()
        deadline = time.monotonic() + WAIT
        while not done.is_set() and time.monotonic() < deadline:
            pass  # computing: no device call

    t = start(worker)
    try:
        assert spinning.wait(WAIT)
        t0 = time.monotonic()
        err = pytest.raises(hal.HalError, s.wait, 1, 0).value
        elapsed = time.monotonic() - t0
    finally:
        done.set()
        join(t)
    assert type(err) is hal.HalError and err.code == S.DEADLINE_EXCEEDED
    assert elapsed < 2.0
