"""Pass 5: memory growth and object lifetimes over long runs (devices kept open in notebooks).

Deterministic: counts of internal structures and weak references after ``gc.collect()``, never RSS.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from halsim.sim.history import PRUNE_AT, SemaphoreHistory
from reference import hal
from reference.hal import StatusCode
from tests.conftest import join

SIMS = ["sim", "sim:sync", "sim:metal", "sim:cuda", "sim:opencl"]
ASYNC_SIMS = ["sim", "sim:metal", "sim:cuda", "sim:opencl"]


# -- the semaphore history ---------------------------------------------------------------------------


class _Env:
    def __init__(self, now):
        self._now = now


class _Threads:
    closing = None
    _order = ()


def test_history_prunes_signals_before_the_floor_and_answers_the_same():
    h = SemaphoreHistory(wake_ns=50)
    env = _Env(0)
    h.bind(env, _Threads())
    for i in range(PRUNE_AT - 1):
        h.signaled("s0", i + 1, t=10 * (i + 1), actor=None)
    assert len(h._signals["s0"][0]) == PRUNE_AT - 1  # not pruned yet
    env._now = 1000  # every wait from now on starts at 1000 or later
    h.signaled("s0", PRUNE_AT, t=10 * PRUNE_AT, actor=None)
    values, times, _ = h._signals["s0"]
    # signals at or before t=1000 collapse into the last of them (value 100, t=1000)
    assert values[0] == 100 and times[0] == 1000
    assert len(values) == PRUNE_AT - 99
    # a wait made at or after the floor sees the same (already met when called) ...
    assert h.effective(*h.reached("s0", 3), me=0, start=1000) <= 1000
    assert h.reached_at("s0", 100) == 1000
    # ... and later signals are kept exactly
    assert h.reached("s0", 150) == (1500, None)
    assert h.reached_at("s0", PRUNE_AT) == 10 * PRUNE_AT


def test_history_keeps_everything_a_blocked_wait_may_ask_about():
    h = SemaphoreHistory(wake_ns=50)

    class Block:
        start = 5

    class HT:
        block = Block()

        class thread:
            @staticmethod
            def is_alive():
                return True

    class Threads(_Threads):
        _order = (HT(),)

        @staticmethod
        def clock_of(_ht):
            return 10 ** 9

    h.bind(_Env(10 ** 9), Threads())
    for i in range(4 * PRUNE_AT):
        h.signaled("s0", i + 1, t=10 * (i + 1), actor=1)
    assert len(h._signals["s0"][0]) == 4 * PRUNE_AT  # the block started at t=5 pins it all
    assert h.reached("s0", 3) == (30, 1)


def test_history_unbound_never_prunes():
    h = SemaphoreHistory(wake_ns=50)
    for i in range(2 * PRUNE_AT):
        h.signaled("s0", i + 1, t=i, actor=None)
    assert len(h._signals["s0"][0]) == 2 * PRUNE_AT


@pytest.mark.parametrize("uri", ASYNC_SIMS)
def test_history_stays_bounded_over_a_long_submit_wait_loop(uri):
    dev = hal.create_device(uri)
    s = dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(64)
    for i in range(3 * PRUNE_AT):
        dev.queue_fill([], [(s, i + 1)], buf, 0, 64, i & 0xFF, 1)
        s.wait(i + 1, timeout=5)
    assert len(dev.history._signals[s.id][0]) < PRUNE_AT
    assert s.query() == 3 * PRUNE_AT
    assert buf.map_read(0, 1) == bytes([(3 * PRUNE_AT - 1) & 0xFF])
    dev.close()


@pytest.mark.parametrize("uri", SIMS)
def test_history_forgets_a_semaphore_the_host_dropped(uri):
    dev = hal.create_device(uri)
    for _ in range(20):
        a = dev.create_semaphore()
        a.signal(1)
        b = dev.create_semaphore()
        b.fail(StatusCode.ABORTED, "x")
        with pytest.raises(hal.HalError):
            b.wait(1, timeout=0)
        del a, b
    gc.collect()
    assert dev.history._signals == {} and dev.history._failed == {}
    dev.close()


# -- a closed device dropped by the host is freed ----------------------------------------------------


@pytest.mark.parametrize("uri", ["local-sync", "local-task"] + SIMS)
def test_closed_device_dropped_by_the_host_is_collected(uri):
    def run():
        dev = hal.create_device(uri)
        s = dev.create_semaphore()
        big = dev.allocator.allocate_buffer(1 << 16)
        dev.queue_fill([], [(s, 1)], big, 0, 1 << 16, 1, 1)
        s.wait(1, timeout=5)
        dev.close()
        return weakref.ref(dev), weakref.ref(big), weakref.ref(s)

    refs = run()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


@pytest.mark.parametrize("uri", SIMS)
def test_host_release_still_traced_after_the_fix(uri):
    with hal.create_device(uri) as dev:
        buf = dev.allocator.allocate_buffer(8)
        bid = buf.id
        del buf
        gc.collect()
        assert [e["res"] for e in dev.trace if e["ev"] == "host_release"] == [bid]


# -- retain_resources=False -----------------------------------------------------------------------------


@pytest.mark.parametrize("uri", SIMS)
def test_unretained_transients_dropped_without_dealloca_leave_no_entry(uri):
    dev = hal.create_device(uri + "?retain_resources=false")
    s = dev.create_semaphore()
    for i in range(200):
        b = dev.queue_alloca([], [(s, 2 * i + 1)], 64)
        dev.queue_fill([(s, 2 * i + 1)], [(s, 2 * i + 2)], b, 0, 64, 1, 1)
        del b
        s.wait(2 * i + 2, timeout=5)
    gc.collect()
    assert len(dev.recorder._awaiting) <= 65
    dev.close()


@pytest.mark.parametrize("uri", ASYNC_SIMS)
def test_unretained_buffer_released_in_flight_is_traced_between_op_and_op_done(uri):
    dev = hal.create_device(uri + "?retain_resources=false")
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(8)
    bid = buf.id
    dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 8, 7, 1)
    del buf
    gc.collect()
    gate.signal(1)
    done.wait(1, timeout=5)
    evs = [(e["ev"], e.get("res")) for e in dev.trace if e["ev"] in ("op", "host_release", "op_done")]
    assert evs == [("op", None), ("host_release", bid), ("op_done", None)]
    dev.close()


# -- with the patches of /tmp/bughunt5/leaks/patches (02-05) -----------------------------------------


def test_cuda_blocked_entries_go_with_their_semaphores():
    dev = hal.create_device("sim:cuda")
    for _ in range(50):
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(a, 1)], [(b, 1)])
        a.signal(1)
        b.wait(1, timeout=5)
    assert dev._blocked == {}
    dev.close()


@pytest.mark.parametrize("uri", SIMS)
def test_one_shot_ops_do_not_grow_the_trace_templates(uri):
    dev = hal.create_device(uri)
    s = dev.create_semaphore()
    buf = dev.allocator.allocate_buffer(64)
    for i in range(200):
        dev.queue_fill([], [(s, i + 1)], buf, 0, 64, 7, 1)
        s.wait(i + 1, timeout=5)
    assert (len(dev.trace._templates), len(dev.trace._blocks)) == (1, 1)
    cmds = [e for e in dev.trace if e["ev"] == "cmd"]
    assert len(cmds) == 200 and {e["op"] for e in cmds} == {f"0:{i}" for i in range(200)}
    assert all(e["access"] == [[buf.id, 0, 64, "w"]] and e["kind"] == "fill" for e in cmds)
    dev.close()


@pytest.mark.parametrize("uri", SIMS)
def test_ended_host_threads_leave_the_thread_registry(uri):
    import threading

    dev = hal.create_device(uri)
    s = dev.create_semaphore()
    count = [0]

    def work():
        count[0] += 1
        dev.queue_barrier([], [(s, count[0])])
        s.wait(count[0], timeout=5)

    for _ in range(150):
        t = threading.Thread(target=work)
        t.start()
        join(t)
    assert len(dev.threads._order) < 70 and len(dev.threads._known) < 70
    assert 5 in dev.threads._ended  # a join still finds an ended thread's clock
    assert dev.threads.clock_at(5) == dev.threads._clock(*dev.threads._ended[5]) >= dev.env.now
    assert dev.threads.clock_at(10_000) is None
    assert s.query() == 150
    dev.close()
