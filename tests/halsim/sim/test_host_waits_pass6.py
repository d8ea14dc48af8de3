"""Host threads waiting in C, with no frame of their own (sixth pass): ``SimpleQueue.get``, ``os.read``
of a pipe, a timed ``Lock.acquire`` are recognised as waits, so a timed device wait beside one expires
instead of hanging; and a consumer started before the device, woken through one by a host call, is
waited for instead of a false DeadlockError."""

import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from halsim.sim.host_waits import CONDITION, TIMED, WAKING, c_wait
from reference import hal
from tests.conftest import WAIT, join

S = hal.StatusCode
SIM = ["generic", "metal", "cuda", "opencl", "sync"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# -- what c_wait reads from a thread's frame ----------------------------------------------------------------

def _seen_at(target, *args):
    """Start ``target(*args)`` on a thread and return (thread, what c_wait reads once it is in C)."""
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(t.ident)
        got = c_wait(frame, t.ident)
        if got is not None:
            return t, got
        time.sleep(0.001)
    return t, None


def test_c_wait_reads_each_wait_in_c():
    """Threads blocked in C read as waits: untimed ones CONDITION, timed ones TIMED with their timeout."""
    sq, lock, (r, w) = queue.SimpleQueue(), threading.Lock(), os.pipe()
    lock.acquire()
    t1, got1 = _seen_at(lambda: sq.get())
    t2, got2 = _seen_at(lambda: sq.get(True, 30))
    t3, got3 = _seen_at(lambda: lock.acquire(timeout=30))
    t4, got4 = _seen_at(lambda: os.read(r, 1))
    t5, got5 = _seen_at(lambda: lock.__enter__())  # (as ``with lock:`` in threading.Condition calls it)
    assert (got1, got2, got3, got4, got5) == \
        ((CONDITION, None), (TIMED, 30.0), (TIMED, 30.0), (CONDITION, None), (CONDITION, None))
    sq.put(1), sq.put(2), os.write(w, b"x"), lock.release()  # (t3 or t5 takes the lock: the other one next)
    join(t1), join(t2), join(t4)
    deadline = time.monotonic() + WAIT
    while (t3.is_alive() or t5.is_alive()) and time.monotonic() < deadline:
        if lock.locked() and (not t3.is_alive() or not t5.is_alive()):
            lock.release()
        time.sleep(0.001)
    join(t3), join(t5)
    os.close(r), os.close(w)


def test_c_wait_reads_a_call_about_to_return_as_waking_and_a_call_that_never_waits_as_nothing():
    """At the call (a ``c_call`` profile event shows the caller's frame there): an item there is WAKING;
    a non-blocking or zero-timeout call, and a callee that is not a plain load, are no waits."""
    lock, sq, other = threading.Lock(), queue.SimpleQueue(), None
    lock.acquire()
    for item in range(3):
        sq.put(item)
    seen = []

    def profile(frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", "") in ("acquire", "get"):
            seen.append(c_wait(frame, threading.get_ident()))

    def calls():
        lock.acquire(False)
        lock.acquire(blocking=False)
        lock.acquire(timeout=0)
        sq.get(block=False)
        (other or sq).get()  # (what is called may not be the load before the call)
        sq.get()

    sys.setprofile(profile)
    try:
        calls()
    finally:
        sys.setprofile(None)
    assert seen == [None, None, None, None, None, (WAKING, None)]


# -- a timed device wait beside a host thread waiting in C (it hung) ----------------------------------------

CHILD_BESIDE = r'''
import os, queue, sys, threading, time
sys.path.insert(0, ROOT)
from reference import hal
from halsim.sim import DeadlockError
kind, uri = sys.argv[1], sys.argv[2]
dev = hal.create_device(uri)
a = dev.create_semaphore()
sq, lock, (r, w) = queue.SimpleQueue(), threading.Lock(), os.pipe()
lock.acquire()
def worker():
    dev.create_semaphore()  # a host thread
    if kind == "simplequeue": sq.get()
    elif kind == "simplequeue_timed": sq.get(timeout=30)
    elif kind == "timed_lock": lock.acquire(timeout=30)
    else: os.read(r, 1)
th = threading.Thread(target=worker, daemon=True); th.start()
time.sleep(0.05)
t0 = dev.now()
try:
    dev.wait_semaphores(hal.WaitMode.ALL, [(a, 1)], 0.001)
    print("returned")
except hal.HalError as e:
    waits = [i for i, _ in e.report.host_waits] if isinstance(e, DeadlockError) else None
    print(type(e).__name__, e.code.name, waits, dev.now() - t0)
sq.put(1); lock.release(); os.write(w, b"x"); th.join(5); dev.close()
'''.replace("ROOT", repr(ROOT))


def _child(script: str, *args: str) -> str:
    """Run ``script`` in a fresh interpreter; its output, or HANG once it ran 20 s (before the fix)."""
    try:
        out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "HANG"
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("uri", ["sim", "sim:sync"])
@pytest.mark.parametrize("kind", ["simplequeue", "pipe"])
def test_a_timed_wait_beside_a_host_thread_idle_in_an_untimed_c_wait_is_a_deadlock(kind, uri):
    """Host thread 1 idles in ``SimpleQueue.get()`` / ``os.read`` of an empty pipe, as in ``Queue.get()``:
    nothing but another thread ends that, so the 1 ms wait nobody signals is a deadlock at its deadline
    (it hung: thread 1 counted as stalled for ever, and no deadline expires beside a stalled thread)."""
    assert _child(CHILD_BESIDE, kind, uri) == "DeadlockError DEADLINE_EXCEEDED [1] 1000100"  # (1 ms + host_api_ns)


@pytest.mark.parametrize("uri", ["sim", "sim:sync"])
@pytest.mark.parametrize("kind", ["simplequeue_timed", "timed_lock"])
def test_a_timed_wait_beside_a_host_thread_in_a_timed_c_wait_times_out(kind, uri):
    """Host thread 1 waits 30 s in ``lock.acquire(timeout=30)`` / ``sq.get(timeout=30)``: a virtual sleep of
    30 s, as a timed ``Queue.get``; the 1 ms wait ends first, with a plain DEADLINE_EXCEEDED (thread 1
    may still act later: no deadlock). It hung for 30 s of real time."""
    assert _child(CHILD_BESIDE, kind, uri) == "HalError DEADLINE_EXCEEDED None 1000100"


# -- a consumer started before the device, woken through a wait in C by a host call -------------------------

KINDS = ["simplequeue", "lock", "timed_lock", "pipe"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("personality", SIM)
@pytest.mark.parametrize("kind", KINDS)
def test_consumer_woken_through_a_wait_in_c_by_a_deferred_host_call_is_waited_for(make, personality, kind):
    """The consumer waits in C; the host call hands it the work and returns DEFERRED; the consumer
    signals. The host thread's wait returns, as on local-task, round after round (it raised
    DeadlockError DEADLINE_EXCEEDED at once: a wait in C was not seen, so neither was the wake-up; a
    pipe's reader or a lock's waiter that got what it waited for in C, waiting for the GIL, looks as if
    it still waited)."""
    for _ in range(3):
        sq, lock, (r, w) = queue.SimpleQueue(), threading.Lock(), os.pipe()
        lock.acquire()
        box = []

        def consumer():
            if kind == "simplequeue":
                sq.get()
            elif kind == "lock":
                lock.acquire()
            elif kind == "timed_lock":
                lock.acquire(timeout=30)
            else:
                os.read(r, 1)
            box[0].signal(1)

        t = threading.Thread(target=consumer, daemon=True)
        t.start()
        dev = make(personality)
        done = dev.create_semaphore()
        box.append(done)

        def hand_over(*args):
            if kind == "simplequeue":
                sq.put(1)
            elif kind == "pipe":
                os.write(w, b"x")
            else:
                lock.release()
            return S.DEFERRED

        try:
            dev.queue_host_call([], [(done, 1)], hand_over)
            dev.wait_semaphores(hal.WaitMode.ALL, [(done, 1)], WAIT)
            assert done.query() == 1
            assert dev.now() < 10**9  # long before the deadline
        finally:
            if kind not in ("lock", "timed_lock") or lock.locked():
                hand_over()  # (frees the consumer if the host call never ran)
            join(t)
            os.close(r), os.close(w)
            dev.close()


def _wait_in(kind, sq, lock, r):
    """One wait of ``kind`` (one code object for every call: warm, 3.11 specializes it)."""
    if kind == "get":
        sq.get()
    elif kind == "get_timed":
        sq.get(timeout=30)
    elif kind == "acquire_timed":
        lock.acquire(timeout=30)
    else:
        os.read(r, 1)


@pytest.mark.parametrize("kind, expected", [("get", (CONDITION, None)), ("get_timed", (TIMED, 30.0)),
                                            ("acquire_timed", (TIMED, 30.0)), ("read", (CONDITION, None))])
def test_c_wait_reads_a_warm_call_specialized_by_the_interpreter(kind, expected):
    """Code run often is specialized: on 3.11 a call of a builtin (``os.read``) then runs in its PRECALL,
    and a frame waiting in it is there, not at the CALL (such a wait was not read: a consumer started
    before the device and woken by a host call raised a false DeadlockError once its code was warm)."""
    sq, lock, (r, w) = queue.SimpleQueue(), threading.Lock(), os.pipe()
    for _ in range(64):  # (each returns at once: an item, a free lock, a byte there)
        sq.put(1), os.write(w, b"x")
        _wait_in(kind, sq, lock, r)
        if lock.locked():
            lock.release()
    lock.acquire()
    t, got = _seen_at(_wait_in, kind, sq, lock, r)
    sq.put(1), os.write(w, b"x"), lock.release()
    join(t)
    os.close(r), os.close(w)
    assert got == expected


@pytest.mark.timeout(60)
@pytest.mark.parametrize("personality", ["generic", "sync"])
@pytest.mark.parametrize("kind", ["lock", "pipe"])
def test_host_thread_woken_through_a_wait_in_c_just_before_a_wait_for_its_signal_is_waited_for(
        make, personality, kind):
    """Host thread 1 waits (settled) in ``with lock:`` / ``os.read``; thread 0 releases the lock / writes,
    then waits for thread 1's signal. Thread 1 got the lock / read the byte in C and waits for the GIL,
    which looks like waiting still: for LOCK_SETTLE_S after thread 0's action it holds the deadlock
    report back, and it signals. (A guard: the old code counted a pipe's reader as stalled, and this
    race of a lock's waiter, whose window is short, did not show here.)"""
    for _ in range(3):
        dev = make(personality)
        s = dev.create_semaphore()
        lock, (r, w) = threading.Lock(), os.pipe()
        lock.acquire()

        def worker():
            dev.create_semaphore()  # a host thread
            if kind == "lock":
                with lock:
                    pass
            else:
                os.read(r, 1)
            s.signal(1)

        t = threading.Thread(target=worker, daemon=True)
        t.start()
        time.sleep(0.1)  # (real time: thread 1 settles in its wait)
        dev.create_semaphore()
        time.sleep(0.06)
        lock.release() if kind == "lock" else os.write(w, b"x")
        try:
            s.wait(1, WAIT)
            assert s.query() == 1
        finally:
            if kind == "pipe":
                os.write(w, b"x")  # (frees thread 1 if it never read)
            join(t)
            os.close(r), os.close(w)


@pytest.mark.parametrize("module, expected", [("program", (TIMED, 5.0)), ("halsim.sim.host_turns", None)])
def test_a_condition_wait_called_by_the_device_is_not_the_programs(module, expected):
    """The device's turn gate waits in threading's Condition.wait (a timed lock acquire in threading.py):
    not a wait of the program's (it was read as one: every look at the threads parsed it)."""
    cond, go = threading.Condition(), threading.Event()
    ns = {"__name__": module, "cond": cond, "go": go}
    exec("def waiter():\n    with cond:\n        go.set()\n        cond.wait(5)\n", ns)  # noqa: S102
    t = threading.Thread(target=ns["waiter"])
    t.start()
    try:
        assert go.wait(10)
        with cond:   # (the waiter released it inside wait: it is in the timed acquire now)
            frame = sys._current_frames()[t.ident]
            assert frame.f_code.co_name == "wait"
            assert c_wait(frame, t.ident) == expected
            cond.notify()
    finally:
        t.join(10)
    assert not t.is_alive()
