"""Statistics of the staged pipeline on the generic simulator (virtual time: exact values)."""

import json

from reference.trace import Trace

from halsim.cli import main
from halsim.trace_tools.stats import depth_summary, trace_stats, union_and_overlap


def test_stats_values(traces):
    st = trace_stats(Trace.load(traces["generic"]), top=2)
    assert (st["ops"], st["commands"], st["failed_ops"], st["makespan_ns"]) == (10, 22, 0, 85541)
    assert st["window"] == {"start": 2300, "end": 87841}
    # queue 0 runs 0:3 [16862, 36803), 0:6 [39803, 59744), 0:8 [62744, 82685): each compute waits for the
    # previous one (plus the 3000 ns launch latency), so they no longer overlap
    assert st["tracks"][0] == {"track": 0, "name": "queue 0", "kind": "queue", "ops": 3, "busy_ns": 3 * 19941,
                               "idle_ns": 85541 - 3 * 19941, "utilization": 0.699349, "overlap_ns": 0,
                               "max_concurrency": 1}
    # queue 1: the fill overlaps upload 0, copy 0 overlaps upload 2; upload 1 now waits for upload 0
    assert [t["max_concurrency"] for t in st["tracks"]] == [1, 2]
    assert [(d["queue"], d["ops"], d["max"]) for d in st["queue_depth"]] == [(0, 3, 3), (1, 7, 6)]
    assert st["critical_path"] == {"ops": ["0:1", "0:3", "0:6", "0:8", "0:9"],
                                   "busy_ns": 7462 + 19941 + 19941 + 19941 + 2156, "length": 5}
    assert st["top"] == [{"op": "0:3", "kind": "execute", "track": "queue 0", "start": 16862, "duration_ns": 19941},
                         {"op": "0:6", "kind": "execute", "track": "queue 0", "start": 39803, "duration_ns": 19941}]


def test_in_order_queue_edges_lengthen_the_critical_path(traces):
    st = trace_stats(Trace.load(traces["metal"]))
    assert st["critical_path"]["ops"] == ["0:0", "0:1", "0:3", "0:6", "0:8", "0:9"]
    assert all(t["max_concurrency"] == 1 for t in st["tracks"])  # Metal queues run one op at a time


def test_helpers():
    assert union_and_overlap([]) == (0, 0, 0)
    assert union_and_overlap([(0, 10), (0, 10), (10, 12)]) == (12, 10, 2)
    assert depth_summary([(0, 10), (5, 10)], 0, 10) == (2, 1.5)


def test_stats_cli(traces, capsys):
    assert main(["stats", traces["generic"], "--json", "--top", "1"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["top"][0]["op"] == "0:3" and len(st["top"]) == 1
    assert main(["stats", traces["generic"]]) == 0
    out = capsys.readouterr().out
    assert "critical path: 5 ops, 69.441 us of op time: 0:1 -> 0:3 -> 0:6 -> 0:8 -> 0:9" in out
    assert main(["stats", traces["generic"], "--top", "-1"]) == 2
    assert capsys.readouterr().err == "halsim: error: --top: must be >= 0\n"
