"""Adversarial pass 4 of the trace tools' command line: a deadlocked program's trace has its stats
(the failures of a queue shutting down form no cycle), ``--findings`` refuses an object without a
``findings`` list, and wrongly typed id fields are refused as the trace is loaded (one line, exit 2)."""

import json

import pytest

from reference import hal
from reference.trace import Trace

from halsim.cli import main
from halsim.trace_tools import model
from halsim.trace_tools.deps import op_graph, signal_wait_edges
from halsim.trace_tools.model import event_problem
from halsim.trace_tools.stats import critical_path, trace_stats


# -- a deadlocked program's trace ---------------------------------------------------------------------

def _deadlocked_trace(path=None):
    """0:0 and 0:1 fill a buffer (they run); 0:2 waits for 0:1 and for 0:3, 0:3 for 0:2: a deadlock.
    The queue shutting down cancels 0:2 and 0:3, then fails s3 (cause 0:2) and s2 (cause 0:3)."""
    from halsim.sim import DeadlockError
    with hal.create_device("sim", queues=1) as dev:
        buf = dev.allocator.allocate_buffer(1 << 20)
        a, b, c, d = (dev.create_semaphore() for _ in range(4))
        dev.queue_fill([], [(a, 1)], buf, 0, 1 << 20, 7, 1)
        dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 1 << 20, 8, 1)
        dev.queue_barrier([(b, 1), (c, 1)], [(d, 1)])
        dev.queue_barrier([(d, 1)], [(c, 1)])
        with pytest.raises(DeadlockError):
            d.wait(1)
    if path is not None:
        dev.trace.save(path)
    return dev.trace


def test_a_deadlocked_trace_has_stats_over_what_completed():
    trace = _deadlocked_trace()
    # both failures are wait edges; together they are the cycle that deadlocked
    assert [(e.src, e.dst, e.kind) for e in signal_wait_edges(trace)] == [
        ("0:0", "0:1", "semaphore"), ("0:1", "0:2", "semaphore"), ("0:3", "0:2", "fail"), ("0:2", "0:3", "fail")]
    # s2 failed after 0:2 had been cancelled: that edge orders nothing; s3 failed before 0:3 finished
    assert sorted(op_graph(trace).edges(data="failed")) == [("0:0", "0:1", False), ("0:1", "0:2", False),
                                                          ("0:2", "0:3", True)]
    st = trace_stats(trace)
    assert st["critical_path"] == {"ops": ["0:0", "0:1"], "busy_ns": 2 * 6743, "length": 2}
    assert (st["ops"], st["failed_ops"], st["makespan_ns"]) == (4, 2, 19486)


def test_halsim_stats_of_a_deadlocked_schedule(tmp_path, capsys):
    """The report's reproducer: the corpus's two-barrier cycle, run, then ``halsim stats``."""
    import os
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "checks", "corpus", "deadlock_semaphore_cycle.toml")
    t = str(tmp_path / "t.json")
    assert main(["run", corpus, "--trace", t]) == 1  # (the host wait raised the deadlock)
    capsys.readouterr()
    assert main(["stats", t, "--json"]) == 0
    out, err = capsys.readouterr()
    st = json.loads(out)
    assert err == ""
    assert st["critical_path"] == {"ops": ["0:0"], "busy_ns": 0, "length": 1}
    assert (st["ops"], st["failed_ops"], st["makespan_ns"]) == (2, 2, 1100)


def test_a_hand_made_cycle_loses_the_edges_that_close_it():
    import networkx as nx
    from halsim.trace_tools.stats import acyclic
    g = nx.DiGraph()
    for op, (start, end) in {"a": (0, 5), "b": (5, 7), "c": (7, 20)}.items():
        g.add_node(op, start=start, end=end)
    g.add_edge("a", "b", failed=False)
    g.add_edge("b", "c", failed=True)
    g.add_edge("c", "a", failed=False)
    assert sorted(acyclic(g).edges) == [("a", "b"), ("c", "a")]  # the failure edge goes first
    assert critical_path(g) == (["c", "a", "b"], 13 + 5 + 2)
    g["b"]["c"]["failed"] = False
    assert sorted(acyclic(g).edges) == [("a", "b"), ("b", "c")]  # else the cycle's last edge
    assert sorted(g.edges) == [("a", "b"), ("b", "c"), ("c", "a")]  # (g itself is left as it was)


# -- --findings --------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["TRACE", '{"find": []}', '{"findings": {"rule": "x"}}'])
@pytest.mark.parametrize("command", ["export", "plot"])
def test_findings_object_without_a_findings_list_is_refused(traces, tmp_path, capsys, content, command):
    f = traces["generic"] if content == "TRACE" else str(tmp_path / "f.json")
    if content != "TRACE":
        (tmp_path / "f.json").write_text(content)
    out = str(tmp_path / ("x.json" if command == "export" else "x.png"))
    argv = ([command, traces["generic"], "--findings", f] +
            (["--chrome", out] if command == "export" else ["-o", out]))
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"halsim: error: --findings {f!r}: expected a JSON list of findings, or an "
                                       f"object with a 'findings' list (as halsim check --json writes)\n")
    assert not (tmp_path / out).exists()
    # (an object with the list, as halsim check --json writes it, is taken)
    (tmp_path / "g.json").write_text('{"findings": [{"rule": "hazard.raw", "message": "m", "ops": ["0:3"]}]}')
    assert main(argv[:3] + [str(tmp_path / "g.json")] + argv[4:]) == 0
    assert capsys.readouterr().err == "" and (tmp_path / out).exists()


# -- wrongly typed fields ------------------------------------------------------------------------------

def _mutated(src, tmp_path, ev, field, value):
    """A copy of trace ``src`` with ``field`` of its first ``ev`` event set to ``value``: (path, line, index)."""
    lines = open(src).read().split("\n")
    for i, line in enumerate(lines[1:], 1):
        if line.startswith('{"ev":"%s"' % ev):
            e = json.loads(line.rstrip(","))
            e[field] = value
            lines[i] = json.dumps(e, separators=(",", ":")) + ("," if line.endswith(",") else "")
            path = tmp_path / f"{ev}.{field}.json"
            path.write_text("\n".join(lines))
            return str(path), i + 1, i - 1
    raise AssertionError(f"no {ev} event in {src}")


COMMANDS = [["stats"], ["export", "--chrome", "OUT.json"], ["plot", "-o", "OUT.png"], ["diff", "SAME"], ["check"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("ev, field, value, problem", [
    ("track", "id", [1, 2], "track event: 'id' must be a non-negative integer, got a list"),
    ("track", "name", [1, 2], "track event: 'name' must be a string, got a list"),
    ("buffer", "buf", [1, 2], "buffer event: 'buf' must be a string, got a list"),
])
def test_the_reported_id_fields_are_refused_by_every_tool(traces, tmp_path, capsys, command, ev, field, value,
                                                          problem):
    path, line, index = _mutated(traces["metal"], tmp_path, ev, field, value)
    argv = [command[0], path] + [traces["metal"] if a == "SAME" else str(tmp_path / a) if a.startswith("OUT")
                                 else a for a in command[1:]]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"halsim: error: {path}:{line}: event {index}: {problem}\n"


@pytest.mark.parametrize("ev, field, value, problem", [
    ("op", "queue", [0], "op event: 'queue' must be a non-negative integer or null, got a list"),
    ("op", "thread", None, "op event: 'thread' must be a non-negative integer, got null"),
    ("op", "cb", {"a": 1}, "op event: 'cb' must be a string or null, got an object"),
    ("op_done", "track", None, "op_done event: 'track' must be a non-negative integer, got null"),
    ("op_done", "message", 5, "op_done event: 'message' must be a string, got 5"),
    ("cmd", "track", "x", "cmd event: 'track' must be a non-negative integer, got 'x'"),
    ("cmd", "start", None, "cmd event: 'start' must be a non-negative integer (nanoseconds), got null"),
    ("cmd", "access", [["b0", 0, "x", "w"]],
     "cmd event: 'access' must be a list of [buffer, offset, length, mode] entries, got a list"),
    ("cmd", "t", 2 ** 70, f"cmd event: 't' must be a non-negative integer (nanoseconds), got {2 ** 70}"),
    ("signal", "cause", ["0:0"], "signal event: 'cause' must be a string, got a list"),
    ("signal", "value", -1, "signal event: 'value' must be a non-negative integer, got -1"),
    ("semaphore", "initial", "x", "semaphore event: 'initial' must be a non-negative integer, got 'x'"),
    ("retain", "res", [1], "retain event: 'res' must be a list of ids (strings), got a list"),
    ("host_wait", "wait", "x", "host_wait event: 'wait' must be a list of [semaphore, value] pairs, got 'x'"),
    ("host_wait", "thread", None, "host_wait event: 'thread' must be a non-negative integer, got null"),
    ("host_read", "buf", 3, "host_read event: 'buf' must be a string, got 3"),
    ("metal_cb", "commit", "x", "metal_cb event: 'commit' must be a non-negative integer (nanoseconds), got 'x'"),
    ("encoder", "kind", None, "encoder event: 'kind' must be a string, got null"),
])
def test_other_id_and_key_fields_are_checked_as_the_trace_is_loaded(traces, tmp_path, capsys, ev, field, value,
                                                                    problem):
    src = traces["metal_sync"] if ev == "host_read" else traces["metal"]
    path, line, index = _mutated(src, tmp_path, ev, field, value)
    for command in (["stats", path], ["check", path]):
        assert main(command) == 2
        assert capsys.readouterr().err == f"halsim: error: {path}:{line}: event {index}: {problem}\n"


def test_a_missing_required_field_is_named():
    assert event_problem({"ev": "buffer", "t": 0}) == "buffer event: 'buf' missing"
    assert event_problem({"ev": "host_wait", "t": 5, "wait": []}) == "host_wait event: 'thread' missing"
    assert event_problem({"ev": "cmd", "t": 5, "op": "0:0", "kind": "fill"}) == "cmd event: 'index' missing"


def test_the_fast_paths_agree_with_the_field_table(traces, monkeypatch):
    """``cmd``, ``op``, ``op_done`` and ``signal`` events are passed by one expression each; every
    event of the test traces, and every field of each set to each of several wrong values, gets the
    same verdict as from the field table alone."""
    events = [e for name in ("metal", "generic", "failure", "host", "local-task") for e in Trace.load(traces[name])]
    kinds = {}
    for e in events:
        kinds.setdefault(e["ev"], e)
    values = [None, "x", -1, 1.5, True, 2 ** 63, [1, 2], {"a": 1}, [["s0", "x"]], [["b0", 0, 4, "w", 1]], 0, "s0"]
    cases = list(events)
    optional = ("status", "message", "entry", "start", "ready", "end", "track", "access", "cause", "thread", "queue",
                "cb", "buf", "call", "wait", "signal")
    for e in kinds.values():
        for key in e:
            cases += [{**e, key: v} for v in values]
            cases.append({k: v for k, v in e.items() if k != key})
        for key in optional:  # (a field the event lacks, added: the fast paths' shortcut for the usual shape)
            cases += [{**e, key: v} for v in values]
    fast = [event_problem(e) for e in cases]
    monkeypatch.setattr(model, "_FAST", {})
    slow = [event_problem(e) for e in cases]
    assert fast == slow
    assert set(kinds) >= {"cmd", "op", "op_done", "signal"} and sum(p is not None for p in slow) > 200
