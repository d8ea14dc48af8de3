"""Trace diff: alignment by program-order id, structural and timing differences, exit codes."""

import json

import pytest
from reference import hal
from reference.trace import Trace

from halsim.cli import main
from halsim.trace_tools.diff import _inversions, diff_traces, format_diff
from halsim.trace_tools.synth import synthetic_trace


def test_identical_traces(traces):
    r = diff_traces(Trace.load(traces["metal"]), Trace.load(traces["metal"]))
    assert r["within_tolerance"] and r["problems"] == []
    assert r["makespan"] == {"a": 102125, "b": 102125, "ratio": 1.0, "error": 0.0}
    assert r["timing"]["start_delta_max_abs"] == 0 and r["timing"]["duration_ratio_median"] == 1.0


def test_generic_vs_metal(traces):
    r = diff_traces(Trace.load(traces["generic"]), Trace.load(traces["metal"]))
    assert r["ops"]["common"] == 10 and r["ops"]["missing_count"] == r["ops"]["extra_count"] == 0
    # same signal->wait edges; Metal adds its in-order queue edges (diff keys edges by kind, so queue 0's
    # 0:3 -> 0:6 and 0:6 -> 0:8 and queue 1's 0:1 -> 0:2 and 0:7 -> 0:9, also semaphore edges in both
    # traces, are still listed as queue edges)
    assert r["edges"]["only_a_count"] == 0
    assert r["edges"]["only_b"] == [["0:0", "0:1", "queue"], ["0:1", "0:2", "queue"], ["0:2", "0:4", "queue"],
                                    ["0:4", "0:5", "queue"], ["0:3", "0:6", "queue"], ["0:5", "0:7", "queue"],
                                    ["0:6", "0:8", "queue"], ["0:7", "0:9", "queue"]]
    # generic: 85541, the compute chain 0:1 -> 0:3 -> 0:6 -> 0:8 -> 0:9 (the new waits are off it: upload 1
    # now runs after upload 0, [16862, 24324), still long before compute 1; copies 1 and 2 already waited
    # for computes that end after copies 0 and 1 and the fill).
    # Metal: 500 ns per event wait; copy 2 (0:9, last on the critical path) now waits on s1, s3 and s2,
    # 2 waits more than before: 102125 = 101125 + 2 * 500 (the other extra waits are off the critical path)
    assert r["makespan"] == {"a": 85541, "b": 102125, "ratio": 1.193872, "error": 0.193872}
    assert r["problems"] == ["makespan differs by 19.4% (tolerance 10.0%)"]
    # busy / makespan: queue 0 3 * 19941 / 85541 and 3 * 21341 / 102125; queue 1 27798 / 85541 (the union:
    # fill + upload 0 [5300, 13862), upload 1 [16862, 24324), copy 0 + upload 2 [39803, 47265), copies 1
    # and 2 2 * 2156) and 34838 / 102125 (2984 + 3 * 7962 + 3 * 2656, one at a time)
    assert [(u["queue"], u["a"], u["b"]) for u in r["utilization"]] == [(0, 0.699349, 0.626908), (1, 0.324967, 0.341131)]
    assert diff_traces(Trace.load(traces["generic"]), Trace.load(traces["metal"]), tolerance=0.4)["within_tolerance"]
    assert all(s["first_difference"] is None and s["final_a"] == s["final_b"] == (1 if s["sem"] == "s3" else 3)
               for s in r["semaphores"])


def test_sim_vs_local_task_aligns_on_program_order(traces):
    r = diff_traces(Trace.load(traces["demo-sim"]), Trace.load(traces["local-task"]))
    assert r["ops"]["common"] == 6 and r["edges"]["only_a_count"] == r["edges"]["only_b_count"] == 0
    assert r["ops"]["commands"] == [] and r["ops"]["status"] == []
    assert r["b"]["clock"] == "monotonic" and r["timing"]["compared"] == 6
    assert all(s["first_difference"] is None for s in r["semaphores"])


def test_missing_and_extra_ops():
    r = diff_traces(synthetic_trace(10, 2, 2), synthetic_trace(8, 2, 2))
    assert (r["ops"]["missing"], r["ops"]["extra"]) == (["0:8", "0:9"], [])
    assert r["problems"][0] == "2 ops missing from B"
    assert "semaphore s0 values differ" in r["problems"]
    r = diff_traces(synthetic_trace(8, 2, 2), synthetic_trace(10, 3, 2))
    assert r["ops"]["extra"] == ["0:8", "0:9"]
    assert r["ops"]["commands"][0] == {"op": "0:0", "a": ["fill", "fill"], "b": ["fill", "fill", "fill"]}


def _failure_or_not(fail):
    with hal.create_device("sim", queues=1) as dev:
        buf = dev.allocator.allocate_buffer(64)
        a, b = dev.create_semaphore(), dev.create_semaphore()
        dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 64, 1, 1)
        if fail:
            a.fail(hal.StatusCode.ABORTED, "boom")
            with pytest.raises(hal.HalError):
                b.wait(1)
        else:
            a.signal(1)
            b.wait(1)
    return dev.trace


def test_status_and_failure_differences():
    r = diff_traces(_failure_or_not(False), _failure_or_not(True))
    assert r["ops"]["status"] == [{"op": "0:0", "a": 0, "b": 10}]
    s0 = r["semaphores"][0]
    assert (s0["sem"], s0["final_a"], s0["final_b"], s0["failed_a"], s0["failed_b"]) == ("s0", 1, 0, False, True)
    assert r["problems"][:1] == ["1 ops differ in status"] and not r["within_tolerance"]


def _two_ops(first_start, second_start):
    t = Trace({"device": "sim:metal", "clock": "virtual", "personality": "metal"})
    t.emit({"ev": "track", "id": 0, "kind": "queue", "name": "queue 0"})
    for k, start in enumerate((first_start, second_start)):
        t.emit({"ev": "op", "t": 0, "op": f"0:{k}", "kind": "barrier", "thread": 0, "queue": 0, "wait": [], "signal": []})
        t.emit({"ev": "op_done", "t": start + 10, "op": f"0:{k}", "ready": 0, "start": start, "track": 0, "status": 0})
    return t


def test_order_inversions():
    r = diff_traces(_two_ops(0, 10), _two_ops(10, 0))
    assert r["order_inversions"] == [{"queue": 0, "count": 1, "examples": [["0:0", "0:1"]]}]
    assert r["problems"] == ["1 order inversions on in-order queues"]
    assert _inversions([3, 1, 2, 0]) == 5


def test_diff_cli(traces, tmp_path, capsys):
    assert main(["diff", traces["metal"], traces["metal"]]) == 0
    assert capsys.readouterr().out.endswith("within tolerance\n")
    assert main(["diff", traces["generic"], traces["metal"], "--json", "--plot", str(tmp_path / "d.svg")]) == 1
    assert json.loads(capsys.readouterr().out)["makespan"]["error"] == 0.193872
    assert (tmp_path / "d.svg").exists()
    assert main(["diff", traces["generic"], traces["metal"], "--tolerance", "0.5"]) == 0
    capsys.readouterr()
    assert main(["diff", traces["generic"], str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err == f"halsim: error: {tmp_path / 'nope.json'}: no such file\n"
    assert main(["diff", traces["generic"], traces["metal"], "--tolerance", "-1"]) == 2
    assert main(["diff", traces["generic"], traces["metal"], "--plot", str(tmp_path / "d.gif")]) == 2


def test_outputs_are_compared_read_by_read():
    from reference import hal

    def run(pattern):
        dev = hal.create_device("sim")
        try:
            buf, done = dev.allocator.allocate_buffer(32), dev.create_semaphore()
            dev.queue_fill([], [(done, 1)], buf, 0, 32, pattern, 1)
            done.wait(1)
            buf.map_read(0, 16)
            buf.map_read(16, 16)
        finally:
            dev.close()
        return dev.trace
    same = diff_traces(run(7), run(7))
    assert same["outputs"] == {"reads_a": 2, "reads_b": 2, "differ": [], "differ_count": 0}
    other = diff_traces(run(7), run(8))
    # (reads are numbered per host thread: threads interleave differently on different devices)
    assert other["outputs"]["differ"] == [{"thread": 0, "read": 0, "buf": "b0", "offset": 0, "length": 16},
                                          {"thread": 0, "read": 1, "buf": "b0", "offset": 16, "length": 16}]
    assert "2 of the host's buffer reads differ" in other["problems"]
    assert "outputs: 2 host reads in A, 2 in B, 2 differ; thread 0 read #0 of b0[0:16)" in format_diff(other)


def test_an_op_that_took_no_time_in_b_counts_in_the_duration_ratios():
    """Its ratio B/A is 0.0, which the summary dropped as if it had none (min 1.0, not 0.0)."""
    def run(cost):
        with hal.create_device("sim", cost_model=cost) as dev:
            buf = dev.allocator.allocate_buffer(4096)
            s = dev.create_semaphore()
            dev.queue_fill([], [(s, 1)], buf, 0, 4096, 7, 4)
            dev.queue_host_call([(s, 1)], [(s, 2)], lambda *a: None)
            dev.queue_fill([(s, 2)], [(s, 3)], buf, 0, 64, 7, 4)
            s.wait(3, 10)
        return dev.trace

    timing = diff_traces(run({}), run({"host_call_latency_ns": 0}), tolerance=10)["timing"]
    assert sorted(d["ratio"] for d in timing["largest"]) == [0.0, 1.0, 1.0]
    assert (timing["duration_ratio_min"], timing["duration_ratio_median"]) == (0.0, 1.0)
