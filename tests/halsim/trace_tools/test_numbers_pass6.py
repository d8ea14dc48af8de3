"""Exact numbers of the trace tools on small programs: host-wait edges carried over several waits,
ANY waits, diff alignment and host reads per thread, command nesting at an operation's end, and
Perfetto flow order at one instant."""

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from halsim.trace_tools.deps import Edge, host_wait_edges, op_graph
from halsim.trace_tools.diff import diff_traces, format_diff
from halsim.trace_tools.flows import signal_flows
from halsim.trace_tools.layout import Item, assign_lanes, nest_events
from halsim.trace_tools.model import TraceIndex
from halsim.trace_tools.perfetto_export import export_perfetto
from halsim.trace_tools.stats import trace_stats
from reference import hal
from reference.trace import Trace

TE = pb.TrackEvent
FILL = {"host_api_ns": 10, "submit_ns": 100, "launch_ns": 1000, "fill_latency_ns": 500, "fill_gb_per_s": 1.0,
        "wake_ns": 50}


def _edges(trace):
    return [(e.src, e.dst, e.sem, e.value) for e in host_wait_edges(trace)]


# -- host waits: what a thread saw carries forward ---------------------------------------------------

def test_an_op_after_two_host_waits_depends_on_what_both_saw():
    with hal.create_device("sim", cost_model=FILL, queues=2) as dev:
        buf = dev.allocator.allocate_buffer(16384)
        sx, sw, sy = [dev.create_semaphore() for _ in range(3)]
        dev.queue_fill([], [(sx, 1)], buf, 0, 10000, 1, 1)                       # 0:0 X: 10500 ns
        dev.queue_fill([], [(sw, 1)], buf, 12288, 100, 1, 1, queue_affinity=2)   # 0:1 W: 600 ns
        sx.wait(1, timeout=30)
        sw.wait(1, timeout=30)                                                   # W done long before
        dev.queue_fill([], [(sy, 1)], buf, 10240, 1000, 1, 1)                    # 0:2 Y: 1500 ns
        sy.wait(1, timeout=30)
    assert _edges(dev.trace) == [("0:0", "0:2", "s0", 1), ("0:1", "0:2", "s1", 1)]
    assert sorted(op_graph(dev.trace).edges(data="kind")) == [("0:0", "0:2", "program"), ("0:1", "0:2", "program")]
    assert trace_stats(dev.trace)["critical_path"] == {"ops": ["0:0", "0:2"], "busy_ns": 12000, "length": 2}


def test_a_host_signals_waiter_depends_on_everything_the_thread_had_seen():
    with hal.create_device("sim", cost_model=FILL, queues=2) as dev:
        buf = dev.allocator.allocate_buffer(16384)
        sx, sw, go, done = [dev.create_semaphore() for _ in range(4)]
        dev.queue_fill([(go, 1)], [(done, 1)], buf, 10240, 100, 1, 1)            # 0:0 Z waits for the host
        dev.queue_fill([], [(sx, 1)], buf, 0, 1000, 1, 1)                        # 0:1 X
        dev.queue_fill([], [(sw, 1)], buf, 12288, 100, 1, 1, queue_affinity=2)   # 0:2 W
        sx.wait(1, timeout=30)
        sw.wait(1, timeout=30)
        go.signal(1)
        done.wait(1, timeout=30)
    assert _edges(dev.trace) == [("0:1", "0:0", "s0", 1), ("0:2", "0:0", "s1", 1)]


def test_the_carry_keeps_only_what_no_later_op_stands_for():
    """X seen, Y enqueued after (X -> Y), Y seen: Y stands for X. P -> Q by a semaphore, Q seen: Q
    stands for P. So Z, enqueued last, gets edges from Y and Q only (and the edge count stays linear)."""
    with hal.create_device("sim", cost_model=FILL, queues=2) as dev:
        buf = dev.allocator.allocate_buffer(16384)
        sx, sy, sp, sq, sz = [dev.create_semaphore() for _ in range(5)]
        dev.queue_fill([], [(sx, 1)], buf, 0, 100, 1, 1)                         # 0:0 X
        sx.wait(1, timeout=30)
        dev.queue_fill([], [(sy, 1)], buf, 1024, 100, 1, 1)                      # 0:1 Y
        dev.queue_fill([], [(sp, 1)], buf, 2048, 100, 1, 1, queue_affinity=2)    # 0:2 P
        dev.queue_fill([(sp, 1)], [(sq, 1)], buf, 3072, 100, 1, 1)               # 0:3 Q
        sp.wait(1, timeout=30)
        sy.wait(1, timeout=30)
        sq.wait(1, timeout=30)
        dev.queue_fill([], [(sz, 1)], buf, 4096, 100, 1, 1)                      # 0:4 Z
        sz.wait(1, timeout=30)
    assert _edges(dev.trace) == [("0:0", "0:1", "s0", 1), ("0:0", "0:2", "s0", 1), ("0:0", "0:3", "s0", 1),
                                 ("0:1", "0:4", "s1", 1), ("0:3", "0:4", "s3", 1)]


def test_a_loop_of_enqueue_and_wait_gets_one_edge_per_iteration():
    with hal.create_device("sim", cost_model=FILL, queues=1) as dev:
        buf = dev.allocator.allocate_buffer(64)
        s = dev.create_semaphore()
        for k in range(1, 41):
            dev.queue_fill([], [(s, k)], buf, 0, 64, k, 1)
            s.wait(k, timeout=30)
    assert _edges(dev.trace) == [(f"0:{k}", f"0:{k + 1}", "s0", k + 1) for k in range(39)]


# -- WaitMode.ANY: ordered after the signal that woke it only -----------------------------------------

def _any_wait_trace():
    cm = {**FILL, "wake_ns": 5000}
    with hal.create_device("sim", cost_model=cm, queues=2) as dev:
        buf = dev.allocator.allocate_buffer(8192)
        sw, sx, sy = [dev.create_semaphore() for _ in range(3)]
        dev.queue_fill([], [(sx, 1)], buf, 0, 3000, 1, 1)                        # 0:0 X: [1150, 4650]
        dev.queue_fill([], [(sw, 1)], buf, 4096, 100, 1, 1, queue_affinity=2)    # 0:1 W: [1260, 1860]
        dev.wait_semaphores(hal.WaitMode.ANY, [(sw, 1), (sx, 1)], timeout=30)    # woken by W, returns 6860
        dev.queue_fill([], [(sy, 1)], buf, 6000, 100, 1, 1)                      # 0:2 Y
        sy.wait(1, timeout=30)
    return dev.trace


def test_an_any_wait_orders_only_after_its_first_satisfier():
    trace = _any_wait_trace()
    (hw, _last) = trace.events("host_wait")
    assert (hw["mode"], hw["t"]) == ("any", 6860)
    assert host_wait_edges(trace) == [Edge("0:1", "0:2", "s0", 1, "program")]
    assert trace_stats(trace)["critical_path"] == {"ops": ["0:0"], "busy_ns": 3500, "length": 1}
    ix = TraceIndex.of(trace)
    assert [(src, dst) for src, dst, _s, _v in signal_flows(ix) if dst[0] == "host_wait"] == [
        (("op", 1), ("host_wait", 0)), (("op", 2), ("host_wait", 1))]


def test_an_any_wait_met_by_an_initial_value_orders_after_nothing():
    """It returned at once (as the checks' happens-before model has it), though 0:0, one of its
    timepoints, had signalled by then."""
    with hal.create_device("sim", cost_model=FILL, queues=2) as dev:
        buf = dev.allocator.allocate_buffer(16384)
        sx, sl, sy = [dev.create_semaphore() for _ in range(3)]
        ready = dev.create_semaphore(1)
        dev.queue_fill([], [(sx, 1)], buf, 0, 64, 1, 1)                          # 0:0: short
        dev.queue_fill([], [(sl, 1)], buf, 4096, 10000, 1, 1, queue_affinity=2)  # 0:1: long
        sl.wait(1, timeout=30)
        dev.wait_semaphores(hal.WaitMode.ANY, [(sx, 1), (ready, 1)], timeout=30)
        dev.queue_fill([], [(sy, 1)], buf, 0, 64, 2, 1)                          # 0:2
        sy.wait(1, timeout=30)
    assert _edges(dev.trace) == [("0:1", "0:2", "s1", 1)]


# -- diff: a common id naming two different queue calls -------------------------------------------------

def _two_thread_trace(device, sems, signals, queues=None, reads=()):
    """Two host threads, each one fill signalling ``signals[thread - 1]``; ``sems``: (id, creating
    thread) in creation order; ``reads``: (thread, buf, digest) host reads in trace order."""
    t = Trace({"device": device, "clock": "virtual", "personality": "generic",
               "options": {} if queues is None else {"queues": queues}})
    t.emit({"ev": "track", "id": 0, "kind": "queue", "name": "queue 0"})
    for sem, thread in sems:
        t.emit({"ev": "semaphore", "t": 0, "sem": sem, "initial": 0, "thread": thread})
    for thread, (sem, queue) in enumerate(signals, start=1):
        op = f"{thread}:0"
        t.emit({"ev": "op", "t": 100, "op": op, "kind": "fill", "thread": thread, "queue": queue, "wait": [],
                "signal": [[sem, 1]]})
        t.emit({"ev": "cmd", "t": 1100, "op": op, "index": 0, "kind": "fill", "start": 100, "track": 0})
        t.emit({"ev": "op_done", "t": 1100, "op": op, "ready": 100, "start": 100, "track": 0, "status": 0})
        t.emit({"ev": "signal", "t": 1100, "sem": sem, "value": 1, "cause": op})
    for thread, buf, digest in reads:
        t.emit({"ev": "host_read", "t": 2000, "buf": buf, "offset": 0, "length": 64, "digest": digest,
                "thread": thread})
    return t


def test_diff_reports_a_common_id_whose_operations_signal_different_semaphores():
    # sim numbers threads by start order, local-task by first use: 1:0 is a different call in each
    main = [("s0", 0), ("s1", 0)]
    a = _two_thread_trace("sim", main, [("s0", 0), ("s1", 0)], queues=1)
    b = _two_thread_trace("local-task", main, [("s1", 0), ("s0", 0)])
    r = diff_traces(a, b, tolerance=1e9)
    assert r["ops"]["misaligned"] == [
        {"op": "1:0", "fields": ["signal"], "a": {"signal": [["s0", 1]]}, "b": {"signal": [["s1", 1]]}},
        {"op": "2:0", "fields": ["signal"], "a": {"signal": [["s1", 1]]}, "b": {"signal": [["s0", 1]]}}]
    assert r["ops"]["misaligned_count"] == 2
    assert r["problems"] == ["2 ops differ in queue, waits or signals (one id, two different queue calls?)"]
    assert not r["within_tolerance"]
    assert "  1:0: signal [['s0', 1]] -> [['s1', 1]]" in format_diff(r).splitlines()


def test_diff_compares_semaphores_by_who_created_them_and_queues_only_between_equal_counts():
    # each thread created its own semaphore, in a different order on each device: s0/s1 swap, but
    # each op still signals its own thread's first semaphore
    a = _two_thread_trace("sim", [("s0", 1), ("s1", 2)], [("s0", 1), ("s1", 1)], queues=2)
    b = _two_thread_trace("local-task", [("s0", 2), ("s1", 1)], [("s1", 0), ("s0", 0)])
    r = diff_traces(a, b, tolerance=1e9)
    assert r["ops"]["misaligned"] == [] and r["ops"]["misaligned_count"] == 0  # queue 1 of 2 vs queue 0 of 1
    c = _two_thread_trace("sim", [("s0", 1), ("s1", 2)], [("s0", 1), ("s1", 1)], queues=1)
    r = diff_traces(a, c, tolerance=1e9)
    assert r["ops"]["misaligned"] == []
    d = _two_thread_trace("sim", [("s0", 1), ("s1", 2)], [("s0", 0), ("s1", 1)], queues=2)
    r = diff_traces(a, d, tolerance=1e9)
    assert r["ops"]["misaligned"] == [{"op": "1:0", "fields": ["queue"], "a": {"queue": 1}, "b": {"queue": 0}}]


def test_diff_compares_host_reads_per_thread_in_program_order():
    main = [("s0", 0), ("s1", 0)]
    sig = [("s0", 0), ("s1", 0)]
    a = _two_thread_trace("sim", main, sig, reads=[(1, "b1", "aa"), (2, "b0", "bb")])
    b = _two_thread_trace("local-task", main, sig, reads=[(2, "b0", "bb"), (1, "b1", "aa")])
    r = diff_traces(a, b, tolerance=1e9)
    assert r["outputs"] == {"reads_a": 2, "reads_b": 2, "differ": [], "differ_count": 0}
    assert r["within_tolerance"]
    c = _two_thread_trace("local-task", main, sig, reads=[(2, "b0", "cc"), (1, "b1", "aa"), (1, "b1", "aa")])
    r = diff_traces(a, c, tolerance=1e9)
    assert r["outputs"]["differ"] == [{"thread": 2, "read": 0, "buf": "b0", "offset": 0, "length": 64}]
    assert r["problems"] == ["1 of the host's buffer reads differ", "the host read 2 buffers in A and 3 in B"]


def test_diff_numbers_a_host_calls_reads_by_its_op():
    def trace(digest):
        t = _two_thread_trace("sim", [("s0", 0), ("s1", 0)], [("s0", 0), ("s1", 0)])
        t.emit({"ev": "host_read", "t": 3000, "buf": "b0", "offset": 0, "length": 8, "digest": digest,
                "thread": None, "op": "1:0"})
        return t
    r = diff_traces(trace("aa"), trace("bb"), tolerance=1e9)
    assert r["outputs"]["differ"] == [{"thread": None, "op": "1:0", "read": 0, "buf": "b0", "offset": 0,
                                       "length": 8}]
    assert "outputs: 1 host reads in A, 1 in B, 1 differ; host call 1:0 read #0 of b0[0:8)" in format_diff(r)


# -- layout: a zero-length command at its operation's end ---------------------------------------------

def test_a_zero_length_command_at_its_ops_end_nests_under_that_op():
    items = [Item(160, 1660, "0:0", "op", 0), Item(160, 1660, "fill", "cmd", 0),
             Item(1660, 1660, "barrier", "cmd", 1), Item(1660, 3160, "0:1", "op", 1),
             Item(1660, 1660, "barrier", "cmd", 2), Item(1660, 3160, "fill", "cmd", 3)]
    owner = {0: 0, 1: 0, 2: 1, 3: 1}
    (lane,) = assign_lanes(items, owner=lambda i: owner[i.ref])
    events = [(t, what, item.name, item.ref) for t, what, item in nest_events(lane)]
    assert events == [
        (160, "B", "0:0", 0), (160, "B", "fill", 0), (1660, "E", "fill", 0),
        (1660, "B", "barrier", 1), (1660, "E", "barrier", 1), (1660, "E", "0:0", 0),   # 0:0's, inside 0:0
        (1660, "B", "0:1", 1), (1660, "B", "fill", 3), (1660, "B", "barrier", 2),     # 0:1's, inside 0:1
        (1660, "E", "barrier", 2), (3160, "E", "fill", 3), (3160, "E", "0:1", 1)]


def _ancestors(path, name):
    t = pb.Trace.FromString(open(path, "rb").read())
    stacks, found = {}, []
    for p in sorted((p for p in t.packet if p.HasField("track_event")), key=lambda p: p.timestamp):
        te = p.track_event
        st = stacks.setdefault(te.track_uuid, [])
        if te.type == TE.TYPE_SLICE_BEGIN:
            if te.name == name:
                found.append(list(st))
            st.append(te.name)
        elif te.type == TE.TYPE_SLICE_END:
            st.pop()
    return found


def test_perfetto_nests_a_final_zero_length_barrier_under_its_execute(tmp_path):
    cm = {**FILL, "launch_ns": 0, "barrier_ns": 0}
    with hal.create_device("sim", cost_model=cm, queues=1) as dev:
        buf = dev.allocator.allocate_buffer(4096)
        a, b = dev.create_semaphore(), dev.create_semaphore()
        cb = dev.create_command_buffer(categories=hal.CommandCategory.ANY)
        cb.begin()
        cb.fill_buffer(hal.BufferRef(buf, 0, 1000), 1, 1)
        cb.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.TRANSFER)
        cb.end()
        dev.queue_execute([], [(a, 1)], cb)                            # 0:0: fill, then barrier at its end
        dev.queue_fill([(a, 1)], [(b, 1)], buf, 1024, 1000, 1, 1)      # 0:1 starts at that instant
        b.wait(1, timeout=30)
    ops = {o["op"]: (o["start"], o["end"]) for o in dev.trace.operations()}
    assert ops == {"0:0": (150, 1650), "0:1": (1650, 3150)}
    export_perfetto(dev.trace, tmp_path / "t.pftrace")
    assert _ancestors(tmp_path / "t.pftrace", "barrier") == [["0:0 execute"]]
    assert _ancestors(tmp_path / "t.pftrace", "fill") == [["0:0 execute"], ["0:1 fill"]]


# -- Perfetto: an arrow's start before its end at one instant -------------------------------------------

def test_perfetto_writes_an_arrows_start_first_when_both_ends_are_at_one_instant(tmp_path):
    cm = {"host_api_ns": 10, "submit_ns": 100, "launch_ns": 0, "wake_ns": 50}
    with hal.create_device("sim", cost_model=cm, queues=2) as dev:
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(a, 1)], [(b, 1)])                       # 0:0 on queue 0 waits for 0:1
        dev.queue_barrier([], [(a, 1)], queue_affinity=2)           # 0:1 on queue 1 signals a
        b.wait(1, timeout=10**9)
    assert {o["op"]: (o["start"], o["end"]) for o in dev.trace.operations()} == {"0:0": (240, 240),
                                                                                  "0:1": (240, 240)}
    path = tmp_path / "t.pftrace"
    export_perfetto(dev.trace, path)
    t = pb.Trace.FromString(open(path, "rb").read())
    names = {p.track_descriptor.uuid: (p.track_descriptor.name, p.track_descriptor.sibling_order_rank)
             for p in t.packet if p.HasField("track_descriptor") and p.track_descriptor.parent_uuid}
    events = [(names[p.track_event.track_uuid][0], p.timestamp, p.track_event.name, list(p.track_event.flow_ids),
               list(p.track_event.terminating_flow_ids))
              for p in t.packet if p.HasField("track_event") and p.track_event.type == TE.TYPE_SLICE_BEGIN]
    assert events == [("queue 1", 240, "0:1 barrier", [1], []), ("queue 0", 240, "0:0 barrier", [2], [1]),
                      ("host thread 0", 250, "host wait s1>=1", [], [2])]
    # (shown in track order all the same)
    assert sorted(names.values(), key=lambda nr: nr[1])[:3] == [("queue 0", 0), ("queue 1", 1), ("host thread 0", 2)]


def test_lane_order_puts_tied_arrow_sources_first_and_keeps_track_order_otherwise():
    from halsim.trace_tools.perfetto_export import _lane_order

    assert _lane_order(4, []) == [0, 1, 2, 3]
    assert _lane_order(4, [(0, 2)]) == [0, 1, 2, 3]
    assert _lane_order(4, [(3, 1), (2, 0)]) == [2, 0, 3, 1]
    assert _lane_order(3, [(2, 1), (1, 2)]) == [0, 1, 2]  # a cycle: track order
