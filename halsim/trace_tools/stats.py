"""Summary statistics of a trace (like HTA's, for our traces).

* per track (hardware queue, stream, worker, host thread running ops): busy time (the union of its
  operations' spans), idle time within the trace window, utilization, overlap (time with more than
  one operation running: ``sum of spans - busy``) and the most operations running at once;
* queue depth per submission queue (the op's ``queue`` field): operations enqueued and not yet
  finished, over time — its maximum and time-weighted mean over the window;
* the critical path through the happens-before graph (``deps.op_graph``): the chain of dependent
  operations with the largest total running time;
* the ``top`` longest operations.

The window runs from the first operation's enqueue to the last operation's end.

>>> from reference import hal
>>> with hal.create_device("sim", queues=1) as dev:
...     buf = dev.allocator.allocate_buffer(1 << 20)
...     a, b = dev.create_semaphore(), dev.create_semaphore()
...     dev.queue_fill([], [(a, 1)], buf, 0, 1 << 20, 7, 1)
...     dev.queue_fill([(a, 1)], [(b, 1)], buf, 0, 1 << 20, 8, 1)
...     b.wait(1)
>>> st = trace_stats(dev.trace)
>>> st["critical_path"]["ops"], st["tracks"][0]["ops"], st["queue_depth"][0]["max"]
(['0:0', '0:1'], 2, 2)
"""

from __future__ import annotations

import networkx as nx

from .deps import op_graph
from .model import TraceIndex


def union_and_overlap(spans: list[tuple[int, int]]) -> tuple[int, int, int]:
    """``(union length, overlap = total - union, most spans at once)`` of ``[start, end)`` spans.

    >>> union_and_overlap([(0, 10), (5, 15), (20, 25)])
    (20, 5, 2)
    """
    if not spans:
        return 0, 0, 0
    total = sum(e - s for s, e in spans)
    union, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                union += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    union += cur_e - cur_s
    depth = most = 0
    for _, d in _depth_points(spans):
        depth += d
        most = max(most, depth)
    return union, total - union, most


def _depth_points(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(t, +1 | -1)`` for each span's start and end, in time order; at one instant the spans that
    end there close first (``[s, e)``: back to back is not at once), then those that start open, then
    zero-length ones close — an op that ran in no time was still running at that instant.

    >>> union_and_overlap([(3, 3)])[2], union_and_overlap([(3, 3), (3, 3)])[2], union_and_overlap([(0, 3), (3, 5)])[2]
    (1, 2, 1)
    """
    points = []
    for s, e in spans:
        points.append((s, 1, 1))
        points.append((e, 2 if e == s else 0, -1))
    points.sort()
    return [(t, d) for t, _order, d in points]


def depth_summary(spans: list[tuple[int, int]], lo: int, hi: int) -> tuple[int, float]:
    """``(max, time-weighted mean over [lo, hi))`` of how many spans are open."""
    if not spans or hi <= lo:
        return 0, 0.0
    points = _depth_points(spans)
    depth = most = 0
    area = 0
    last = lo
    for t, d in points:
        t = min(max(t, lo), hi)
        area += depth * (t - last)
        last = t
        depth += d
        most = max(most, depth)
    area += depth * (hi - last)
    return most, area / (hi - lo)


def acyclic(g: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``g`` without the edges that close its cycles (a failure edge of each cycle
    first, else the cycle's last edge, until none is left). ``op_graph`` of a recorded trace has
    no cycle; only a hand-made or edited trace can make one."""
    g = g.copy()
    while True:
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return g
        failed = [(u, v) for u, v, *_ in cycle if g.edges[u, v].get("failed")]
        g.remove_edge(*(failed[0] if failed else cycle[-1][:2]))


def critical_path(g: nx.DiGraph) -> tuple[list[str], int]:
    """The path with the largest sum of op durations (``end - start``; 0 for ops that never ran),
    over :func:`acyclic` ``(g)`` when ``g`` has a cycle."""
    try:
        order = list(nx.topological_sort(g))
    except nx.NetworkXUnfeasible:
        g = acyclic(g)
        order = list(nx.topological_sort(g))
    best: dict[str, tuple[int, str | None]] = {}
    for v in order:
        a = g.nodes[v]
        dur = max(0, (a.get("end") or 0) - (a.get("start") or 0)) if a.get("start") is not None else 0
        prev = max(((best[u][0], u) for u in g.predecessors(v)), default=(0, None))
        best[v] = (prev[0] + dur, prev[1])
    if not best:
        return [], 0
    v = max(best, key=lambda n: best[n][0])
    total = best[v][0]
    path = []
    while v is not None:
        path.append(v)
        v = best[v][1]
    return path[::-1], total


def trace_stats(trace, top: int = 10) -> dict:
    """The statistics as a JSON-able dict (shape in ``docs/trace-tools.md``)."""
    ix = TraceIndex.of(trace)
    ran = [op for op in ix.ops if ix.ran(op)]
    lo = min((op["t"] for op in ix.ops), default=0)
    hi = max((op["end"] for op in ran), default=lo)
    window = hi - lo
    by_track: dict = {}
    for op in ran:
        by_track.setdefault(op.get("track", -1), []).append((op["start"], op["end"]))
    tracks = []
    for tid in sorted(by_track):
        kind, name = ix.tracks.get(tid, ("unknown", f"track {tid}"))
        busy, overlap, most = union_and_overlap(by_track[tid])
        tracks.append({"track": tid, "name": name, "kind": kind, "ops": len(by_track[tid]), "busy_ns": busy,
                       "idle_ns": window - busy, "utilization": round(busy / window, 6) if window else 0.0,
                       "overlap_ns": overlap, "max_concurrency": most})
    by_queue: dict = {}
    for op in ix.ops:
        end = op.get("end")
        by_queue.setdefault(op.get("queue"), []).append((op["t"], end if end is not None else hi))
    depth = []
    for q in sorted(by_queue, key=lambda x: (x is None, str(x))):
        most, mean = depth_summary(by_queue[q], lo, hi)
        depth.append({"queue": q, "ops": len(by_queue[q]), "max": most, "mean": round(mean, 6)})
    path, busy = critical_path(op_graph(ix))
    longest = sorted(ran, key=lambda op: (-(op["end"] - op["start"]), ix.op_pos[op["op"]]))[:top]
    return {
        "device": ix.header.get("device"), "clock": ix.header.get("clock"),
        "ops": len(ix.ops), "commands": ix.cmd_count,
        "failed_ops": sum(1 for op in ix.ops if op.get("status", 0) not in (0, None)),
        "window": {"start": lo, "end": hi}, "makespan_ns": window,
        "tracks": tracks, "queue_depth": depth,
        "critical_path": {"ops": path, "busy_ns": busy, "length": len(path)},
        "top": [{"op": op["op"], "kind": op.get("kind"),
                 "track": ix.tracks.get(op.get("track"), ("", str(op.get("track"))))[1],
                 "start": op["start"], "duration_ns": op["end"] - op["start"]} for op in longest],
    }


def _ns(v: int | float) -> str:
    v = float(v)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3f} {unit}"
    return f"{v:.0f} ns"


def format_stats(st: dict) -> str:
    """A plain-text report of :func:`trace_stats`."""
    lines = [f"trace: {st['device']} ({st['clock']} clock): {st['ops']} ops, {st['commands']} commands, "
             f"{st['failed_ops']} failed; makespan {_ns(st['makespan_ns'])}", "",
             f"{'track':<24} {'ops':>7} {'busy':>12} {'idle':>12} {'util':>6} {'overlap':>12} {'max conc':>8}"]
    for t in st["tracks"]:
        lines.append(f"{t['name']:<24} {t['ops']:>7} {_ns(t['busy_ns']):>12} {_ns(t['idle_ns']):>12} "
                     f"{100 * t['utilization']:>5.1f}% {_ns(t['overlap_ns']):>12} {t['max_concurrency']:>8}")
    lines += ["", "queue depth (ops enqueued, not finished): " + ", ".join(
        f"queue {d['queue']}: max {d['max']}, mean {d['mean']:.2f}" for d in st["queue_depth"])]
    cp = st["critical_path"]
    shown = " -> ".join(cp["ops"][:12]) + (" -> ..." if cp["length"] > 12 else "")
    lines += ["", f"critical path: {cp['length']} ops, {_ns(cp['busy_ns'])} of op time: {shown}"]
    if st["top"]:
        lines += ["", f"longest {len(st['top'])} ops:"]
        lines += [f"  {o['op']:<10} {o['kind']:<10} {o['track']:<20} {_ns(o['duration_ns']):>12}" for o in st["top"]]
    return "\n".join(lines)
