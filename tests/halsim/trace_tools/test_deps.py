"""Dependency edges: signal→wait by value, failures, initial values, queue order, host waits."""

from reference.trace import Trace

from halsim.trace_tools.deps import Edge, op_graph, queue_edges, signal_wait_edges
from halsim.trace_tools.model import TraceIndex, personality


def test_signal_wait_edges_are_the_same_on_every_device(traces, staged_edges):
    for name in ("generic", "metal", "metal_sync"):
        edges = signal_wait_edges(Trace.load(traces[name]))
        assert sorted((e.src, e.dst, e.sem, e.value) for e in edges) == sorted(staged_edges), name
        assert {e.kind for e in edges} == {"semaphore"}
    # demo_pipeline (submitted consumer first, released by the host's signal of s0): a chain on s1
    demo = [("host:0", "0:5", "s0", 1), ("0:5", "0:4", "s1", 1), ("0:4", "0:3", "s1", 2), ("0:3", "0:2", "s1", 3),
            ("0:2", "0:1", "s1", 4), ("0:1", "0:0", "s1", 5)]
    for name in ("local-task", "demo-sim"):
        edges = signal_wait_edges(Trace.load(traces[name]))
        assert sorted((e.src, e.dst, e.sem, e.value) for e in edges) == sorted(demo), name


def test_queue_edges_only_on_in_order_devices(traces):
    assert queue_edges(Trace.load(traces["generic"])) == []
    assert queue_edges(Trace.load(traces["local-task"])) == []
    edges = queue_edges(Trace.load(traces["metal"]))
    assert [(e.src, e.dst, e.value) for e in edges] == [
        ("0:0", "0:1", 1), ("0:1", "0:2", 1), ("0:2", "0:4", 1), ("0:4", "0:5", 1), ("0:3", "0:6", 0),
        ("0:5", "0:7", 1), ("0:6", "0:8", 0), ("0:7", "0:9", 1)]
    assert {e.kind for e in edges} == {"queue"}


def test_op_graph_nodes_and_edge_kinds(traces, staged_edges):
    g = op_graph(Trace.load(traces["metal"]))
    assert list(g.nodes) == [f"0:{i}" for i in range(10)]
    assert g.nodes["0:3"]["kind"] == "execute" and g.nodes["0:3"]["commands"] == 5
    kinds = {}
    for _u, _v, k in g.edges(data="kind"):
        kinds[k] = kinds.get(k, 0) + 1
    # 17 semaphore edges; of the 8 queue edges, 4 coincide with semaphore edges (which say more and are
    # kept): queue 0's compute k-1 -> compute k, 0:3 -> 0:6 and 0:6 -> 0:8, and queue 1's upload 0 ->
    # upload 1 (0:1 -> 0:2, s0) and copy 1 -> copy 2 (0:7 -> 0:9, s2), leaving 6 - 2 = 4 queue edges
    # (0:0 -> 0:1, 0:2 -> 0:4, 0:4 -> 0:5, 0:5 -> 0:7; copy 0 -> copy 1 is 0:4 -> 0:7, not a queue edge)
    assert kinds == {"semaphore": 17, "queue": 4}
    assert g.edges["0:3", "0:6"]["kind"] == g.edges["0:6", "0:8"]["kind"] == "semaphore"
    assert g.edges["0:1", "0:2"]["kind"] == g.edges["0:7", "0:9"]["kind"] == "semaphore"
    assert [g.edges[e]["kind"] for e in (("0:0", "0:1"), ("0:2", "0:4"), ("0:4", "0:5"), ("0:5", "0:7"))] == ["queue"] * 4
    assert g.edges["0:0", "0:4"] == {"kind": "semaphore", "sem": "s3", "value": 1, "failed": False}
    g2 = op_graph(Trace.load(traces["generic"]))
    assert sorted(g2.edges) == sorted((s, d) for s, d, _, _ in staged_edges)


def test_failure_satisfies_with_failure(traces):
    edges = signal_wait_edges(Trace.load(traces["failure"]))
    assert edges == [Edge("host:0", "0:0", "s0", 1, "fail")]
    assert list(op_graph(Trace.load(traces["failure"])).edges) == []  # host causes are not op nodes


def test_host_wait_and_initial_value_edges(traces):
    t = Trace.load(traces["host"])
    assert signal_wait_edges(t) == [Edge("host:0", "0:3", "s1", 1, "semaphore")]  # s2>=5: initially met
    g = op_graph(t)
    # the host waited for 0:0's s0=1 before enqueueing 0:1, 0:2 and before signalling s1 (0:3's wait)
    assert sorted(g.edges(data="kind")) == [("0:0", "0:1", "program"), ("0:0", "0:2", "program"),
                                            ("0:0", "0:3", "program")]


def test_personality_from_header_or_uri():
    assert personality({"device": "sim:metal?queues=2"}) == "metal"
    assert personality({"device": "opencl"}) == "opencl"
    assert personality({"device": "sim", "personality": "generic"}) == "generic"
    assert TraceIndex({"device": "sim:cuda"}).in_order is True


def test_an_op_that_fails_a_semaphore_it_waits_on_is_no_edge_into_itself(tmp_path):
    """On sim:cuda a host failure of ``g`` makes the queue sticky: the barrier waiting ``{s >= 1}``
    fails and fails ``s`` itself. That failure did not satisfy its own wait (a self-loop made
    ``halsim stats``' critical path raise ``NetworkXUnfeasible`` and sweep rows lose their metrics)."""
    from reference import hal
    from halsim.trace_tools.stats import trace_stats

    with hal.create_device("sim:cuda") as dev:
        g, s, f = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(g, 1)], [(f, 1)])
        dev.queue_barrier([(s, 1)], [(s, 2)])
        g.fail(hal.StatusCode.ABORTED, "bad input")
        try:
            f.wait(1, timeout=10)
        except hal.HalError:
            pass
    edges = signal_wait_edges(dev.trace)
    assert [(e.src, e.dst, e.sem, e.kind) for e in edges] == [("host:0", "0:0", "s0", "fail")]
    stats = trace_stats(dev.trace)
    assert stats["critical_path"]["ops"] in (["0:0"], ["0:1"])


def test_a_host_wait_returning_at_the_instant_an_earlier_op_was_enqueued_orders_nothing_before_it():
    """With a zero-cost model the wait returns at the very time 0:1 was enqueued before it: compared by
    time, 0:1 got a 'program' edge from what the wait saw (0:0), which closed a cycle with 0:1 → 0:0
    and made ``halsim stats`` raise NetworkXUnfeasible. Trace order decides."""
    from reference import hal
    from halsim.trace_tools.deps import host_wait_edges
    from halsim.trace_tools.stats import trace_stats

    zero = {"host_api_ns": 0, "submit_ns": 0, "wake_ns": 0, "launch_ns": 0, "barrier_ns": 0}
    with hal.create_device("sim", cost_model=zero) as dev:
        x, y = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_barrier([(y, 1)], [(x, 1)])   # 0:0 waits for 0:1
        dev.queue_barrier([], [(y, 1)])         # 0:1, enqueued before the host wait
        x.wait(1, 10)
    (wait,) = dev.trace.events("host_wait")
    assert wait["t"] == [e for e in dev.trace.events("op") if e["op"] == "0:1"][0]["t"]  # the same instant
    assert host_wait_edges(dev.trace) == []
    assert trace_stats(dev.trace)["critical_path"] == {"ops": ["0:1"], "busy_ns": 0, "length": 1}  # (no cycle)
