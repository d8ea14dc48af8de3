"""A host thread blocked in a wait completes the oldest issued action itself (``Engine.help``).

A stand-in adapter whose completion thread never gets past ``synchronize`` (until the test lets it)
shows who completed what: ``timing`` (called by every completion) records the completing thread.
"""

from __future__ import annotations

import threading

import pytest

from real_backends.common.device import EngineDevice
from real_backends.common.engine import Adapter
from reference import hal

WAIT = 10.0


class _Handle:
    def __init__(self, n: int):
        self.n = n
        self.reached = False


class _Adapter(Adapter):
    """Events are :class:`_Handle`; ``query`` reports ``reached`` (None: cannot tell) — to the
    completion thread only once ``release`` is set; ``synchronize`` blocks until then."""

    personality = "stand-in"
    stream_name = "stream"
    wait_policy = "user_event"
    pooled = False
    inline_issue = True

    def __init__(self, queryable: bool):
        self.queryable = queryable
        self.release = threading.Event()
        self.handles: list[_Handle] = []
        self.completed_on: list[tuple[str, str]] = []  # (op kind, thread name), in completion order

    def create_user_event(self):
        return _Handle(-1)

    def set_user_event(self, handle, error) -> None:
        handle.reached = True

    def stream_wait(self, stream, handle) -> None:
        pass

    def submit(self, stream, action) -> None:
        pass

    def record(self, stream, handle):
        h = _Handle(len(self.handles))
        self.handles.append(h)
        return h

    def query(self, handle):
        if not self.queryable:
            return None
        if threading.current_thread().name.endswith(" completion") and not self.release.is_set():
            return False  # the completion thread sees nothing until the test releases it
        return handle.reached

    def synchronize(self, handle, backlog: int = 0):
        assert self.release.wait(WAIT), "the test never released the completion thread"
        return None

    def timing(self, action):
        self.completed_on.append((action.op.kind, threading.current_thread().name))
        return None


class _Device(EngineDevice):
    def __init__(self, queryable: bool, queues: int = 2):
        self.stand_in = _Adapter(queryable)
        super().__init__("stand-in", {}, self.stand_in, queues, pool_capacity=None)


@pytest.fixture
def make():
    devices = []

    def make_device(queryable: bool, queues: int = 2) -> _Device:
        dev = _Device(queryable, queues)
        devices.append(dev)
        return dev
    yield make_device
    for dev in devices:
        dev.stand_in.release.set()
        dev.close()


def test_waiting_host_thread_completes_the_action_itself(make):
    dev = make(queryable=True)
    s = dev.create_semaphore()
    dev.queue_barrier([], [(s, 1)])
    dev.stand_in.handles[0].reached = True
    s.wait(1, timeout=WAIT)  # the completion thread is stuck in synchronize: only the host can do it
    assert s.query() == 1
    assert dev.stand_in.completed_on == [("barrier", threading.current_thread().name)]


def test_without_query_the_completion_thread_completes(make):
    dev = make(queryable=False)
    s = dev.create_semaphore()
    dev.queue_barrier([], [(s, 1)])
    dev.stand_in.handles[0].reached = True
    with pytest.raises(hal.HalError) as e:
        s.wait(1, timeout=0.05)
    assert e.value.code == hal.StatusCode.DEADLINE_EXCEEDED
    dev.stand_in.release.set()
    s.wait(1, timeout=WAIT)
    assert dev.stand_in.completed_on == [("barrier", "stand-in completion")]


def test_completions_follow_the_device_across_queues_but_never_overtake_on_one(make):
    """A user-event device completes what the device reached: a later action on another queue may
    complete first (an earlier one can wait on a user event only a later one's completion sets);
    on one in-order queue, never."""
    dev = make(queryable=True)
    a, b, c = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    dev.queue_barrier([], [(a, 1)], queue_affinity=1)
    dev.queue_barrier([], [(b, 1)], queue_affinity=2)
    dev.queue_barrier([], [(c, 1)], queue_affinity=1)
    dev.stand_in.handles[1].reached = True   # queue 1's action, issued second
    dev.stand_in.handles[2].reached = True   # queue 0's second action: behind the first
    b.wait(1, timeout=WAIT)
    with pytest.raises(hal.HalError) as e:
        c.wait(1, timeout=0.05)
    assert e.value.code == hal.StatusCode.DEADLINE_EXCEEDED
    assert (a.query(), b.query(), c.query()) == (0, 1, 0)
    dev.stand_in.handles[0].reached = True
    c.wait(1, timeout=WAIT)
    me = threading.current_thread().name
    assert dev.stand_in.completed_on == [("barrier", me)] * 3
    assert (a.query(), b.query(), c.query()) == (1, 1, 1)


def test_host_calls_are_left_to_the_completion_thread(make):
    dev = make(queryable=True)
    s = dev.create_semaphore()
    ran_on = []
    dev.queue_host_call([], [(s, 1)], lambda *args: ran_on.append(threading.current_thread().name))
    dev.stand_in.handles[0].reached = True
    with pytest.raises(hal.HalError) as e:
        s.wait(1, timeout=0.05)
    assert e.value.code == hal.StatusCode.DEADLINE_EXCEEDED
    assert ran_on == []
    dev.stand_in.release.set()
    s.wait(1, timeout=WAIT)
    assert ran_on == ["stand-in completion"]
    assert dev.stand_in.completed_on == [("host_call", "stand-in completion")]


def test_a_failed_event_fails_the_wait_through_the_helping_host(make):
    dev = make(queryable=True)
    s = dev.create_semaphore()
    dev.queue_barrier([], [(s, 1)])
    dev.stand_in.query = lambda handle: hal.HalError(hal.StatusCode.ABORTED, "stand-in: device lost")
    with pytest.raises(hal.HalError) as e:
        s.wait(1, timeout=WAIT)
    assert e.value.code == hal.StatusCode.ABORTED
    assert s.failure is not None and s.failure.code == hal.StatusCode.ABORTED


def test_nothing_in_flight_no_spin(make):
    # a wait for another host thread's signal: nothing issued, nothing to help with — the thread
    # goes straight to sleeping on the semaphore instead of spinning for HELP_S
    dev = make(queryable=True)
    s = dev.create_semaphore()
    calls = []
    dev.engine.help(lambda: calls.append(1) or False, budget_s=5.0)  # returns at once, not after 5 s
    assert calls == [1]
    t = threading.Timer(0.02, s.signal, args=(1,))  # another thread's signal still wakes the wait
    t.start()
    s.wait(1, timeout=WAIT)
    t.join(WAIT)
    assert s.query() == 1


def test_gc_thresholds_are_raised_while_an_engine_device_is_open():
    # a collection is a pause of whichever thread allocates: up to 15 ms inside a queue call
    import gc

    from reference.utils import gc_tuning

    before, holders = gc.get_threshold(), gc_tuning._holders
    dev = _Device(queryable=True)
    try:
        assert gc_tuning._holders == holders + 1  # this device holds them (not another one left open)
        assert gc.get_threshold()[0] >= 100_000
    finally:
        dev.stand_in.release.set()
        dev.close()
    assert (gc_tuning._holders, gc.get_threshold()) == (holders, before)
