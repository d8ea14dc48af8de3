"""Compare two traces of one program, operations aligned by program-order id (never by name or time).

The report (a JSON-able dict, shape in ``docs/trace-tools.md``) lists: operations missing from B or
extra in B, operations whose kind, command list or status differ, and those whose queue, waits or
signals differ (``misaligned``: one id, two different queue calls); happens-before edges (signal→wait,
host-wait and in-order queue edges, ``deps.py``) found in one trace only; order inversions on each
queue (two operations of one ``queue`` started in one order in A and the other in B); per-operation
start (from each trace's first enqueue) and duration deltas and ratios; per-queue utilization and the
makespan error; semaphore final values and value sequences; and the outputs — each buffer read the
host made (``host_read`` digests), read by read in each host thread's order. Each trace's times
count from its own first enqueue, so traces on different clocks (simulator vs ``local-task``) compare.

``within_tolerance`` is true when the structure agrees (same operations, kinds, commands, statuses,
queues, waits and signals, semaphore edges, semaphore values, host reads; no inversions where both
devices run queues in order) and the makespan's relative error and each queue's utilization
difference are at most ``tolerance``.

>>> from .synth import synthetic_trace
>>> r = diff_traces(synthetic_trace(8, 2, 2), synthetic_trace(8, 2, 2, scale=1.05), tolerance=0.1)
>>> r["within_tolerance"], r["makespan"]["error"], r["ops"]["common"]
(True, 0.05, 8)
>>> diff_traces(synthetic_trace(8, 2, 2), synthetic_trace(8, 2, 2, scale=1.5))["problems"]
['makespan differs by 50.0% (tolerance 10.0%)']
"""

from __future__ import annotations

import statistics

from .deps import host_wait_edges, queue_edges, signal_wait_edges
from .model import TraceIndex
from .stats import union_and_overlap

EXAMPLES = 20  # list at most this many examples of each kind of difference


def _edge_set(ix: TraceIndex) -> set[tuple[str, str, str]]:
    out = {(e.src, e.dst, "semaphore" if e.kind in ("semaphore", "fail") else e.kind) for e in signal_wait_edges(ix)}
    out |= {(e.src, e.dst, e.kind) for e in queue_edges(ix)}
    out |= {(e.src, e.dst, e.kind) for e in host_wait_edges(ix)}
    return out


def _commands(ix: TraceIndex) -> dict[int, list[str]]:
    """Command names per op position, in index order (encoder spans left out: device specific)."""
    per: dict[int, list[tuple[int, str]]] = {}
    c = ix.cmds
    for op, index, name in zip(c.op, c.index, c.name):
        if index >= 0:
            per.setdefault(op, []).append((index, name))
    return {op: [n for _, n in sorted(v)] for op, v in per.items()}


def _queue_count(ix: TraceIndex) -> int:
    """The device's queue count: its ``queues`` option, else one past the highest queue used."""
    n = (ix.header.get("options") or {}).get("queues")
    if type(n) is int:
        return n
    return 1 + max((op["queue"] for op in ix.ops if type(op.get("queue")) is int), default=0)


def _operands(ix: TraceIndex, op: dict, with_queue: bool) -> dict:
    """What the program gave an operation, comparable across devices: its queue (``with_queue``:
    only where both devices have as many queues, else the same affinity lands on different queues)
    and its waits and signals, semaphores by their identity in the program (``TraceIndex.sem_key``)."""
    out = {f: [(ix.sem_key(s), v) for s, v in op.get(f, ())] for f in ("wait", "signal")}
    if with_queue:
        out["queue"] = op.get("queue")
    return out


def _misaligned(A: TraceIndex, B: TraceIndex, common: list) -> list[dict]:
    """Common ids whose operations differ in queue, waits or signals: not the same queue call, e.g.
    when host threads are numbered differently (the simulator by start order, ``local-task`` by first
    use). Each: ``{"op", "fields", "a", "b"}``, the differing fields as each trace has them."""
    with_queue = _queue_count(A) == _queue_count(B)
    out = []
    for i in common:
        oa, ob = A.ops[A.op_pos[i]], B.ops[B.op_pos[i]]
        xa, xb = _operands(A, oa, with_queue), _operands(B, ob, with_queue)
        fields = [f for f in ("queue", "wait", "signal") if f in xa and xa[f] != xb[f]]
        if fields:
            out.append({"op": i, "fields": fields, "a": {f: oa.get(f) for f in fields},
                        "b": {f: ob.get(f) for f in fields}})
    return out


def _reads_by_reader(ix: TraceIndex) -> dict:
    """Host reads per reader (host thread, or host call), each in that reader's program order."""
    out: dict = {}
    for reader, *read in ix.host_reads:
        out.setdefault(reader, []).append(tuple(read))
    return out


def _outputs(A: TraceIndex, B: TraceIndex) -> tuple[dict, list[str]]:
    """The host reads compared reader by reader, read by read: threads interleave differently on
    different devices, but each thread's reads come in its program order. (report, problems)"""
    ra, rb = _reads_by_reader(A), _reads_by_reader(B)
    differing, counts = [], []
    for reader in sorted(set(ra) | set(rb), key=str):
        xa, xb = ra.get(reader, []), rb.get(reader, [])
        who = {"thread": reader[0]} if reader[1] is None else {"thread": None, "op": reader[1]}
        differing += [{**who, "read": k, "buf": a[0], "offset": a[1], "length": a[2]}
                      for k, (a, b) in enumerate(zip(xa, xb)) if a != b]
        if len(xa) != len(xb):
            counts.append(f"{_reader(who)}: {len(xa)} in A, {len(xb)} in B")
    na, nb = len(A.host_reads), len(B.host_reads)
    outputs = {"reads_a": na, "reads_b": nb, "differ": differing[:EXAMPLES], "differ_count": len(differing)}
    problems = [f"{len(differing)} of the host's buffer reads differ"] if differing else []
    if counts:
        problems.append(f"the host read {na} buffers in A and {nb} in B" if na != nb else
                        "host threads read different numbers of buffers (" + "; ".join(counts[:5]) + ")")
    return outputs, problems


def _inversions(seq: list[float]) -> int:
    """Pairs i < j with seq[i] > seq[j] (merge sort)."""
    def sort(a):
        if len(a) <= 1:
            return a, 0
        mid = len(a) // 2
        left, x = sort(a[:mid])
        right, y = sort(a[mid:])
        merged, n, i, j = [], x + y, 0, 0
        while i < len(left) and j < len(right):
            if right[j] < left[i]:
                merged.append(right[j])
                n += len(left) - i
                j += 1
            else:
                merged.append(left[i])
                i += 1
        merged += left[i:] + right[j:]
        return merged, n
    return sort(seq)[1]


def _utilization(ix: TraceIndex) -> tuple[dict, int, int]:
    ran = [op for op in ix.ops if ix.ran(op)]
    t0 = min((op["t"] for op in ix.ops), default=0)
    span = max((op["end"] for op in ran), default=t0) - t0
    per: dict = {}
    for op in ran:
        per.setdefault(op.get("queue"), []).append((op["start"], op["end"]))
    return {q: (union_and_overlap(s)[0] / span if span else 0.0) for q, s in per.items()}, t0, span


def _ratio(b: float, a: float):
    return round(b / a, 6) if a else None


def diff_traces(a, b, tolerance: float = 0.1) -> dict:
    """Compare traces ``a`` (the reference) and ``b`` (Trace or TraceIndex); see the module docstring."""
    A, B = TraceIndex.of(a), TraceIndex.of(b)
    ids_a, ids_b = [op["op"] for op in A.ops], [op["op"] for op in B.ops]
    set_a, set_b = set(ids_a), set(ids_b)
    common = [i for i in ids_a if i in set_b]
    problems: list[str] = []

    missing = [i for i in ids_a if i not in set_b]
    extra = [i for i in ids_b if i not in set_a]
    cmds_a, cmds_b = _commands(A), _commands(B)
    kind_diff, cmd_diff, status_diff = [], [], []
    for i in common:
        pa, pb = A.op_pos[i], B.op_pos[i]
        oa, ob = A.ops[pa], B.ops[pb]
        if oa.get("kind") != ob.get("kind"):
            kind_diff.append({"op": i, "a": oa.get("kind"), "b": ob.get("kind")})
        sa, sb = oa.get("status", None if oa.get("end") is None else 0), ob.get("status", None if ob.get("end") is None else 0)
        if sa != sb:
            status_diff.append({"op": i, "a": sa, "b": sb})
        elif sa == 0:  # a failed op ran none or some of its commands: only compare successful ones
            ca, cb = cmds_a.get(pa, []), cmds_b.get(pb, [])
            if ca != cb:
                cmd_diff.append({"op": i, "a": ca, "b": cb})
    misaligned = _misaligned(A, B, common)
    for what, items in (("missing from B", missing), ("extra in B", extra), ("differ in kind", kind_diff),
                        ("differ in commands", cmd_diff), ("differ in status", status_diff),
                        ("differ in queue, waits or signals (one id, two different queue calls?)", misaligned)):
        if items:
            problems.append(f"{len(items)} ops {what}")

    ea, eb = _edge_set(A), _edge_set(B)
    only_a = sorted(ea - eb, key=lambda e: (A.op_pos.get(e[1], -1), e))
    only_b = sorted(eb - ea, key=lambda e: (B.op_pos.get(e[1], -1), e))
    sem_edge_diffs = sum(1 for e in only_a + only_b if e[2] == "semaphore")
    if sem_edge_diffs:
        problems.append(f"{sem_edge_diffs} signal->wait edges differ")

    util_a, t0a, span_a = _utilization(A)
    util_b, t0b, span_b = _utilization(B)
    inversions = []
    for q in sorted(set(op.get("queue") for op in A.ops) | set(op.get("queue") for op in B.ops), key=str):
        both = [i for i in common if A.ops[A.op_pos[i]].get("queue") == q and B.ops[B.op_pos[i]].get("queue") == q
                and A.ran(A.ops[A.op_pos[i]]) and B.ran(B.ops[B.op_pos[i]])]
        both.sort(key=lambda i: (A.ops[A.op_pos[i]]["start"], A.op_pos[i]))
        starts_b = [B.ops[B.op_pos[i]]["start"] for i in both]
        n = _inversions(starts_b)
        if n:
            examples = [[both[k], both[k + 1]] for k in range(len(both) - 1)
                        if starts_b[k] > starts_b[k + 1]][:EXAMPLES]
            inversions.append({"queue": q, "count": n, "examples": examples})
    if inversions and A.in_order and B.in_order:
        problems.append(f"{sum(x['count'] for x in inversions)} order inversions on in-order queues")

    deltas = []
    for i in common:
        oa, ob = A.ops[A.op_pos[i]], B.ops[B.op_pos[i]]
        if A.ran(oa) and B.ran(ob):
            da, db = oa["end"] - oa["start"], ob["end"] - ob["start"]
            deltas.append({"op": i, "start_a": oa["start"] - t0a, "start_b": ob["start"] - t0b,
                           "start_delta": (ob["start"] - t0b) - (oa["start"] - t0a),
                           "duration_a": da, "duration_b": db, "duration_delta": db - da, "ratio": _ratio(db, da)})
    ratios = [d["ratio"] for d in deltas if d["ratio"] is not None]  # (0.0: took no time in B)
    timing = {
        "compared": len(deltas),
        "start_delta_max_abs": max((abs(d["start_delta"]) for d in deltas), default=0),
        "start_delta_mean": round(statistics.fmean(d["start_delta"] for d in deltas), 3) if deltas else 0.0,
        "duration_ratio_median": round(statistics.median(ratios), 6) if ratios else None,
        "duration_ratio_min": min(ratios, default=None), "duration_ratio_max": max(ratios, default=None),
        "largest": sorted(deltas, key=lambda d: (-abs(d["duration_delta"]), d["op"]))[:EXAMPLES],
    }

    error = round((span_b - span_a) / span_a, 6) if span_a else (0.0 if span_b == 0 else None)
    makespan = {"a": span_a, "b": span_b, "ratio": _ratio(span_b, span_a), "error": error}
    if error is None or abs(error) > tolerance:
        problems.append(f"makespan differs by {100 * error:.1f}% (tolerance {100 * tolerance:.1f}%)"
                        if error is not None else "makespan: A has none")
    utilization = []
    for q in sorted(set(util_a) | set(util_b), key=str):
        ua, ub = util_a.get(q, 0.0), util_b.get(q, 0.0)
        utilization.append({"queue": q, "a": round(ua, 6), "b": round(ub, 6), "error": round(ub - ua, 6)})
        if abs(ub - ua) > tolerance:
            problems.append(f"queue {q} utilization differs by more than the tolerance")

    fa, fb = A.final_values(), B.final_values()
    sems = []
    for sem in sorted(set(fa) | set(fb), key=lambda s: (len(s), s)):
        va = [v for _s, _t, v, _c in A.signals.get(sem, ())]
        vb = [v for _s, _t, v, _c in B.signals.get(sem, ())]
        first = next((k for k in range(min(len(va), len(vb))) if va[k] != vb[k]),
                     None if len(va) == len(vb) else min(len(va), len(vb)))
        ta = {v: t - t0a for _s, t, v, _c in A.signals.get(sem, ())}
        tb = {v: t - t0b for _s, t, v, _c in B.signals.get(sem, ())}
        shared = set(ta) & set(tb)
        entry = {"sem": sem, "final_a": fa.get(sem), "final_b": fb.get(sem), "signals_a": len(va), "signals_b": len(vb),
                 "first_difference": first, "failed_a": sem in A.fails, "failed_b": sem in B.fails,
                 "max_time_delta": max((abs(tb[v] - ta[v]) for v in shared), default=0)}
        sems.append(entry)
        if entry["final_a"] != entry["final_b"] or first is not None or entry["failed_a"] != entry["failed_b"]:
            problems.append(f"semaphore {sem} values differ")

    # Outputs: what the host read back (host_read digests), compared per thread in program order.
    outputs, read_problems = _outputs(A, B)
    problems += read_problems

    def side(ix, span):
        return {"device": ix.header.get("device"), "clock": ix.header.get("clock"), "ops": len(ix.ops),
                "commands": ix.cmd_count, "makespan_ns": span}

    return {
        "a": side(A, span_a), "b": side(B, span_b), "tolerance": tolerance,
        "ops": {"common": len(common), "missing": missing[:EXAMPLES], "missing_count": len(missing),
                "extra": extra[:EXAMPLES], "extra_count": len(extra), "kind": kind_diff[:EXAMPLES],
                "commands": cmd_diff[:EXAMPLES], "status": status_diff[:EXAMPLES],
                "misaligned": misaligned[:EXAMPLES], "misaligned_count": len(misaligned)},
        "edges": {"only_a": [list(e) for e in only_a[:EXAMPLES]], "only_a_count": len(only_a),
                  "only_b": [list(e) for e in only_b[:EXAMPLES]], "only_b_count": len(only_b)},
        "order_inversions": inversions,
        "timing": timing, "makespan": makespan, "utilization": utilization, "semaphores": sems,
        "outputs": outputs,
        "problems": problems, "within_tolerance": not problems,
    }


def format_diff(r: dict) -> str:
    """A plain-text report of :func:`diff_traces`."""
    a, b = r["a"], r["b"]
    lines = [f"A: {a['device']} ({a['clock']}): {a['ops']} ops, {a['commands']} commands, makespan {a['makespan_ns']} ns",
             f"B: {b['device']} ({b['clock']}): {b['ops']} ops, {b['commands']} commands, makespan {b['makespan_ns']} ns",
             f"ops: {r['ops']['common']} in both, {r['ops']['missing_count']} missing from B, "
             f"{r['ops']['extra_count']} extra in B"]
    for key in ("kind", "commands", "status"):
        for d in r["ops"][key]:
            lines.append(f"  {d['op']}: {key} {d['a']} -> {d['b']}")
    for d in r["ops"]["misaligned"][:5]:
        lines.append(f"  {d['op']}: " + ", ".join(f"{f} {d['a'][f]} -> {d['b'][f]}" for f in d["fields"]))
    e = r["edges"]
    lines.append(f"happens-before edges: {e['only_a_count']} only in A, {e['only_b_count']} only in B")
    lines += [f"  only A: {s} -> {d} ({k})" for s, d, k in e["only_a"][:5]]
    lines += [f"  only B: {s} -> {d} ({k})" for s, d, k in e["only_b"][:5]]
    for inv in r["order_inversions"]:
        lines.append(f"queue {inv['queue']}: {inv['count']} order inversions, e.g. "
                     + ", ".join(f"{x}/{y}" for x, y in inv["examples"][:3]))
    m, t = r["makespan"], r["timing"]
    err = "n/a" if m["error"] is None else f"{100 * m['error']:+.1f}%"
    lines.append(f"makespan: A {m['a']} ns, B {m['b']} ns ({err})")
    lines.append("utilization: " + ", ".join(f"queue {u['queue']}: {100 * u['a']:.1f}% -> {100 * u['b']:.1f}%"
                                            for u in r["utilization"]))
    if t["compared"]:
        lines.append(f"per-op: {t['compared']} compared, duration ratio B/A median {t['duration_ratio_median']} "
                     f"(min {t['duration_ratio_min']}, max {t['duration_ratio_max']}), "
                     f"largest start delta {t['start_delta_max_abs']} ns")
    for s in r["semaphores"]:
        if s["final_a"] != s["final_b"] or s["first_difference"] is not None or s["failed_a"] != s["failed_b"]:
            lines.append(f"semaphore {s['sem']}: final {s['final_a']} -> {s['final_b']}, "
                         f"first different signal #{s['first_difference']}")
    o = r["outputs"]
    lines.append(f"outputs: {o['reads_a']} host reads in A, {o['reads_b']} in B, {o['differ_count']} differ"
                 + "".join(f"; {_reader(d)} read #{d['read']} of {d['buf']}"
                           f"[{d['offset']}:{d['offset'] + d['length']})" for d in o["differ"][:3]))
    lines.append("within tolerance" if r["within_tolerance"] else "DIFFERENT: " + "; ".join(r["problems"]))
    return "\n".join(lines)


def _reader(d: dict) -> str:
    """Who made a host read: ``thread T``, or ``host call OP``'s function."""
    return f"host call {d['op']}" if d.get("op") is not None else f"thread {d['thread']}"
