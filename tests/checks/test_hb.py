"""The happens-before model: exact answers for each kind of edge, on real device traces."""

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from halsim.checks import HappensBefore, TraceModel
from halsim.checks.model import device_ordering
from reference import hal
from reference.trace import Trace


def hb_of(dev) -> HappensBefore:
    return HappensBefore(TraceModel(dev.trace))


def test_device_ordering_from_header():
    assert device_ordering({"device": "sim", "personality": "generic"}) == "unordered"
    assert device_ordering({"device": "local-task"}) == "unordered"
    assert device_ordering({"device": "sim:metal?legacy_sync=1"}) == "in_order"
    assert device_ordering({"device": "opencl"}) == "in_order"
    assert device_ordering({"device": "x", "personality": "opencl"}) == "in_order"
    # CUDA's pending queue actions are issued as their waits resolve: a later one can overtake
    assert device_ordering({"device": "sim:cuda", "personality": "cuda"}) == "unordered"
    assert device_ordering({"device": "sim:sync"}) == "inline"
    assert device_ordering({"device": "local-sync"}) == "inline"


def test_queue_order_only_on_in_order_devices():
    for uri, expected in [("sim", False), ("sim:metal", True)]:
        with hal.create_device(uri) as dev:
            s = dev.create_semaphore()
            dev.queue_barrier([], [(s, 1)])
            dev.queue_barrier([], [])
            dev.queue_barrier([(s, 1)], [(s, 2)])
            s.wait(2)
            hb = hb_of(dev)
            assert hb.op_before("0:0", "0:1") is expected
            assert hb.op_before("0:0", "0:2") is True      # the semaphore orders it everywhere
            assert hb.op_before("0:1", "0:2") is expected
            assert hb.op_before("0:2", "0:0") is False


def test_a_host_call_orders_nothing_after_it_on_an_in_order_queue():
    # Its function runs on the host while the queue goes on (the engines, real and simulated); the
    # queue waited for its waits, though, so what follows it comes after what it waited for.
    for uri in ("sim:opencl", "sim:metal"):
        with hal.create_device(uri, queues=2) as dev:
            s, h = dev.create_semaphore(), dev.create_semaphore()
            dev.queue_barrier([], [], queue_affinity=1)                              # 0:0
            dev.queue_barrier([], [(s, 1)], queue_affinity=2)                        # 0:1 (X)
            dev.queue_host_call([(s, 1)], [(h, 1)], lambda *a: None, queue_affinity=1)  # 0:2 (H)
            dev.queue_barrier([], [], queue_affinity=1)                              # 0:3 (C)
            dev.queue_barrier([], [], queue_affinity=1)                              # 0:4
            h.wait(1)
            dev.queue_flush()
            hb = hb_of(dev)
            assert hb.op_before("0:0", "0:2") is True    # the host call comes after the op before it
            assert hb.op_before("0:2", "0:3") is False   # ... but orders nothing after it
            assert hb.op_before("0:2", "0:4") is False
            assert hb.op_before("0:1", "0:3") is True    # what it waited for still does
            assert hb.op_before("0:0", "0:3") is True    # and the queue order around it holds
            assert hb.op_before("0:3", "0:4") is True


def test_a_wait_is_satisfied_by_the_first_signal_reaching_its_value():
    with hal.create_device("sim", queues=3) as dev:
        s, t = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([], [(s, 3)], queue_affinity=1)        # reaches >= 2 first
        dev.queue_barrier([(s, 3)], [(s, 5)], queue_affinity=2)
        dev.queue_barrier([(s, 2)], [(t, 1)], queue_affinity=4)
        t.wait(1)
        s.wait(5)
        hb = hb_of(dev)
        assert hb.op_before("0:0", "0:2") and not hb.op_before("0:1", "0:2")


def test_host_waits_and_host_signals_order_ops():
    with hal.create_device("sim", queues=2) as dev:
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([], [(a, 1)], queue_affinity=1)     # 0:0
        a.wait(1)                                             # host now after 0:0
        dev.queue_barrier([], [(b, 1)], queue_affinity=2)     # 0:1: after 0:0 through the host
        dev.queue_barrier([(b, 2)], [], queue_affinity=2)     # 0:2: waits for the host's signal
        b.wait(1)
        b.signal(2)
        dev.wait_semaphores(hal.WaitMode.ALL, [(b, 2)])
        dev.sleep(0.001)
        hb = hb_of(dev)
        assert hb.op_before("0:0", "0:1") and hb.op_before("0:1", "0:2") and hb.op_before("0:0", "0:2")
        assert not hb.op_before("0:1", "0:0")


def test_inline_devices_order_every_call_in_program_order():
    with hal.create_device("sim:sync") as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 1)])
        dev.queue_barrier([], [])
        hb = hb_of(dev)
        assert hb.op_before("0:0", "0:1") and hb.lanes == 1


def test_unordered_ops_spread_over_few_lanes():
    with hal.create_device("sim", queues=2) as dev:
        s, t = dev.create_semaphore(), dev.create_semaphore()
        for i in range(1, 51):               # two independent chains of 50 ops
            dev.queue_barrier([(s, i - 1)] if i > 1 else [], [(s, i)], queue_affinity=1)
            dev.queue_barrier([(t, i - 1)] if i > 1 else [], [(t, i)], queue_affinity=2)
        dev.wait_semaphores(hal.WaitMode.ALL, [(s, 50), (t, 50)])
        hb = hb_of(dev)
        assert hb.lanes == 3                 # the host thread and one chain per timeline
        assert hb.op_before("0:0", "0:98") and not hb.op_before("0:0", "0:99")


def test_second_host_thread_gets_its_own_lane():
    with hal.create_device("sim") as dev:
        s = dev.create_semaphore()

        def other():
            dev.queue_barrier([], [(s, 1)])

        th = threading.Thread(target=other)
        th.start()
        s.wait(1)
        th.join()
        dev.queue_barrier([], [])
        hb = hb_of(dev)
        assert hb.op_before("1:0", "0:0")
        assert sorted(hb.lane_names)[:2] == ["host thread 0", "host thread 1"]


def test_hb_graph_is_the_transitive_reduction():
    with hal.create_device("sim:metal") as dev:
        s = dev.create_semaphore()
        for i in range(3):
            dev.queue_barrier([], [(s, i + 1)])
        s.wait(3)
        assert sorted(hb_of(dev).graph().edges) == [("0:0", "0:1"), ("0:1", "0:2")]


def test_model_reads_a_saved_trace(tmp_path):
    with hal.create_device("sim") as dev:
        s = dev.create_semaphore()
        dev.queue_barrier([], [(s, 1)])
        s.wait(1)
        dev.trace.save(tmp_path / "t.json")
    m = TraceModel(Trace.load(tmp_path / "t.json"))
    assert (m.ordering, list(m.ops), m.final_value("s0"), m.first_signal("s0", 1)[1]) == \
        ("unordered", ["0:0"], 1, "0:0")


def test_a_wait_on_a_recorded_event_orders_even_when_its_signal_is_refused():
    """sim:cuda: 0:3 waits for s>=1 on the device, on 0:1's recorded CUevent. Before 0:1's host
    callback signals s=1, the sticky failure 0:0's device error set fails the pending 0:2 and with
    it s, so the signal is refused and no signal orders 0:1 → 0:3. The issue event's ``after``
    does: no hazard between their writes (the checker reported a WAW here before)."""
    from halsim.checks import check_trace
    from halsim.sim.driver import driver

    dev = driver.create_device("cuda", queues=2, faults=[{"op": "0:0", "status": "DATA_LOSS"}])
    try:
        big, buf = dev.allocator.allocate_buffer(1 << 20), dev.allocator.allocate_buffer(16)
        x, s, y, gate = (dev.create_semaphore() for _ in range(4))
        dev.queue_fill([], [(x, 1)], big, 0, 1 << 20, 7, 1)                          # 0:0, fails
        dev.queue_fill([], [(s, 1)], buf, 0, 16, 1, 1, queue_affinity=1 << 1)        # 0:1
        dev.queue_barrier([(gate, 1)], [(s, 2)])                                      # 0:2 pending
        dev.sleep(0.000006)                                                            # 0:1 issued
        dev.queue_fill([(s, 1)], [(y, 1)], buf, 0, 16, 2, 1)                          # 0:3
        try:
            y.wait(1, 1.0)
        except hal.HalError:
            pass
        trace = dev.trace
        (issue,) = [e for e in trace.events("issue") if e["op"] == "0:3"]
        assert issue["after"] == ["0:1"]
        assert [e["cause"] for e in trace.events("fail") if e["sem"] == s.id] == ["0:2"]
        assert not [e for e in trace.events("signal") if e["sem"] == s.id]
        assert HappensBefore(TraceModel(trace)).op_before("0:1", "0:3") is True
        assert [f.rule for f in check_trace(trace).findings if f.category == "hazard"] == []
    finally:
        dev.close()


def _fill_in_threads(dev, how: str) -> list:
    """Two workers each fill a buffer and wait for it, then hand "done" to the main thread, which
    reads both buffers back: ``how`` is the hand-off — "join" (Thread.join), "event", "queue",
    "lifo", "future" (Future.result of a thread pool), "priority" (a PriorityQueue, not recorded) or
    "poll" (a flag polled under a lock, which no trace event records)."""
    bufs = [dev.allocator.allocate_buffer(16) for _ in range(2)]
    sems = [dev.create_semaphore() for _ in range(2)]
    done = [threading.Event() for _ in range(2)]
    box = {"queue": queue.Queue(), "lifo": queue.LifoQueue(), "priority": queue.PriorityQueue()}.get(how)
    lock, flags = threading.Lock(), [False, False]

    def worker(k):
        dev.queue_fill([], [(sems[k], 1)], bufs[k], 0, 16, k + 1, 1)
        sems[k].wait(1, 10)
        if how == "event":
            done[k].set()
        elif box is not None:
            box.put(k)
        elif how == "poll":
            with lock:
                flags[k] = True

    if how == "future":
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(worker, k) for k in range(2)]
            for f in futures:
                f.result(10)
            return [b.map_read() for b in bufs]
    workers = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in workers:
        t.start()
    for k, t in enumerate(workers):
        if how == "join":
            t.join(10)
        elif how == "event":
            assert done[k].wait(10)
        elif box is not None:
            box.get(timeout=10)
        else:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with lock:
                    if flags[k]:
                        break
                time.sleep(0.001)
    out = [b.map_read() for b in bufs]
    for t in workers:
        t.join(10)
    return out


@pytest.mark.parametrize("uri", ["local-task", "sim", "sim:metal", "opencl"])
def test_host_hand_offs_order_the_giving_thread_before_the_receiver(uri):
    """Thread.join, Event, Queue/LifoQueue and thread-pool futures are traced (host_join, host_sync)
    and order the workers' fills before the main thread's reads; a PriorityQueue or a flag polled
    under a lock is not, and the reads race with the fills as far as the trace shows."""
    from halsim.checks import check_trace

    if uri == "opencl":
        pytest.importorskip("pyopencl")
    for how in ("join", "event", "queue", "lifo", "future", "priority", "poll"):
        with hal.create_device(uri) as dev:
            dev.create_semaphore()  # the main thread is host thread 0
            assert _fill_in_threads(dev, how) == [b"\x01" * 16, b"\x02" * 16], (uri, how)
            trace = dev.trace
        joins = [(e["thread"], e["joined"]) for e in trace.events("host_join")]
        syncs = sorted((e["role"], e["via"]) for e in trace.events("host_sync") if e["via"] != "Thread.start")
        hazards = sorted((f.rule, f.ops[0]) for f in check_trace(trace).findings)
        if how != "future":
            assert joins[:2] == [(0, 1), (0, 2)], (uri, how)  # (except for "join": the final joins)
        if how in ("join", "priority", "poll"):
            assert syncs == [], (uri, how)
        elif how == "future":  # submit → work item start, then set_result → result
            assert syncs == [("acquire", "Future.result")] * 2 + [("acquire", "work item start")] * 2 + \
                [("release", "Executor.submit")] * 2 + [("release", "Future.set_result")] * 2, (uri, how)
        else:
            via, got, put = {"event": ("Event", "wait", "set"), "queue": ("Queue", "get", "put"),
                             "lifo": ("LifoQueue", "get", "put")}[how]
            assert syncs == [("acquire", f"{via}.{got}")] * 2 + [("release", f"{via}.{put}")] * 2, (uri, how)
        if how in ("priority", "poll"):
            assert hazards == [("hazard.raw", "1:0.0"), ("hazard.raw", "2:0.0")], (uri, how)
        else:
            assert hazards == [], (uri, how)


@pytest.mark.parametrize("uri", ["local-task", "sim"])
def test_a_hand_off_before_the_worker_waits_still_leaves_the_race(uri):
    """The release is cut where it happened: an Event set before the worker waited for its fill
    orders nothing after the fill, so main's copy out of the buffer still races with it."""
    from halsim.checks import check_trace

    with hal.create_device(uri) as dev:
        dev.create_semaphore()
        bufs = [dev.allocator.allocate_buffer(16) for _ in range(2)]
        s, ev = dev.create_semaphore(), threading.Event()

        def worker():
            dev.queue_fill([], [(s, 1)], bufs[0], 0, 16, 1, 1)
            ev.set()  # too early: the fill may still be running
            s.wait(1, 10)

        t = threading.Thread(target=worker)
        t.start()
        assert ev.wait(10)
        done = dev.create_semaphore()
        dev.queue_copy([], [(done, 1)], bufs[0], 0, bufs[1], 0, 16)  # reads bufs[0]
        done.wait(1, 10)
        t.join(10)
        trace = dev.trace
    assert [(e["role"], e["via"]) for e in trace.events("host_sync")] == \
        [("release", "Thread.start"), ("acquire", "Thread.start"), ("release", "Event.set"), ("acquire", "Event.wait")]
    assert sorted(f.rule for f in check_trace(trace).findings if f.rule.startswith("hazard")) == ["hazard.raw"]


def test_an_in_order_queue_runs_a_sim_thread_calls_in_clock_order_not_trace_order():
    """sim:metal: the main thread's clock runs ahead (costly calls), so a worker's barrier traced after
    main's two reaches queue 0 first. Queue order follows the device (commit times), not the trace:
    in trace order, queue edges 0:0 → 0:1 → 1:0 and 1:0's signal meeting 0:0's wait made a cycle,
    broken so that 0:1 (s=2) came before 0:0 (s=1): a false non-monotonic signal."""
    from halsim.checks import check_trace
    from halsim.sim.driver import driver

    dev = driver.create_device("metal", cost_model={"host_api_ns": 10_000})
    try:
        s, t, done = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        go = []  # a plain list: no traced hand-off, so the worker's clock stays where it started

        def worker():
            deadline = time.monotonic() + 10
            while not go and time.monotonic() < deadline:
                time.sleep(0.001)
            dev.queue_barrier([], [(t, 1)])                 # 1:0, at ~40 µs
        thread = threading.Thread(target=worker)
        thread.start()                                      # at main's ~30 µs
        for _ in range(5):
            dev.create_semaphore()                          # main's clock 80 µs, the simulation at 0
        dev.queue_barrier([(t, 1)], [(s, 1)])               # 0:0
        dev.queue_barrier([(s, 1)], [(s, 2), (done, 1)])    # 0:1
        go.append(1)
        thread.join(10)
        done.wait(1, 10)
        trace = dev.trace
        assert [e["op"] for e in trace.events("op")] == ["0:0", "0:1", "1:0"]
        assert [e["op"] for e in trace.events("metal_cb") if e["step"] == "work"] == ["1:0", "0:0", "0:1"]
        hb = HappensBefore(TraceModel(trace))
        assert [hb.op_before(a, b) for a, b in [("1:0", "0:0"), ("0:0", "0:1"), ("0:1", "0:0")]] == \
            [True, True, False]
        assert check_trace(trace).findings == []
    finally:
        dev.close()
