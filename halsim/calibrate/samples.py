"""Samples for the cost-model fit, read from real-backend traces (``docs/accuracy.md``).

:func:`trace_samples` turns one trace into rows of linear systems, by group (``transfer:fill``,
``dispatch:axpy``, ``issue``, ``launch:device``, ``host_fn``, ``wake:host``, ``submit``, …);
:mod:`.fit` solves them. :func:`align_clocks` first moves a real trace's device timestamps onto a
causal host clock.

>>> s = Samples()
>>> s.add("submit", [1.0, 0.0], 1200)
>>> s.count("submit"), s.rows["submit"]
(1, ([[1.0, 0.0]], [1200.0]))
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from typing import Iterable

from reference.trace import Trace

TRANSFERS = ("fill", "copy", "update")
TIMED_KINDS = ("fill", "copy", "update", "dispatch", "execute")  # ops with device timestamps
LAUNCH_GROUPS = ["launch:device", "launch:issue", "launch:host"]
INF = float("inf")


class CalibrationError(Exception):
    """A parameter cannot be fitted (too few samples, degenerate design) or an input is unusable."""

    __module__ = "halsim.calibrate"  # where users import it from


class Samples:
    """Rows of named linear systems: ``add(group, x_row, y)``."""

    def __init__(self):
        self.rows: dict[str, tuple[list, list]] = {}

    def add(self, group: str, x: Iterable[float], y: float) -> None:
        xs, ys = self.rows.setdefault(group, ([], []))
        xs.append([float(v) for v in x])
        ys.append(float(y))

    def extend(self, other: "Samples") -> None:
        for g, (xs, ys) in other.rows.items():
            mine = self.rows.setdefault(g, ([], []))
            mine[0].extend(xs)
            mine[1].extend(ys)

    def count(self, group: str) -> int:
        return len(self.rows.get(group, ((), ()))[1])


def load_trace(path: str | os.PathLike) -> Trace:
    """``Trace.load`` with every failure as one CalibrationError line."""
    try:
        trace = Trace.load(path)
        for _ in trace:  # a streamed reader validates lines lazily
            pass
        return trace
    except Exception as e:  # noqa: BLE001 - TraceFormatError, OSError, JSON errors: one line
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CalibrationError(f"{os.fspath(path)}: not a readable trace: {msg}") from None


def _first_reaching(signals: dict, sem: str, value: int):
    """The first signal event of ``sem`` with value ≥ ``value`` (signals are in value order)."""
    lst = signals.get(sem)
    if not lst:
        return None
    i = bisect_left([v for v, _t, _c in lst], value)
    return lst[i] if i < len(lst) else None


def align_clocks(events: list[dict]) -> tuple[list[dict], int]:
    """Shift device timestamps (``cmd``, ``op_done`` of ops that have commands) by the smallest amount
    that makes the trace causal: no op starts before the worker began issuing it, none signals
    before it ended. Real backends map device clocks onto the host clock by an offset measured once
    per device (PoCL: one marker), which can be off by hundreds of µs; a simulated trace is causal
    already (shift 0). Returns (events, shift in ns).

    >>> ev = [{"ev": "op", "op": "0:0", "t": 0}, {"ev": "issue", "op": "0:0", "start": 100, "t": 150},
    ...       {"ev": "cmd", "op": "0:0", "start": 40, "t": 60}, {"ev": "op_done", "op": "0:0", "start": 40, "t": 60},
    ...       {"ev": "signal", "op": None, "cause": "0:0", "t": 300}]
    >>> align_clocks(ev)[1]
    60
    """
    issue_start = {e["op"]: e["start"] for e in events if e.get("ev") == "issue"}
    timed = {e["op"] for e in events if e.get("ev") == "cmd" and e.get("start") is not None}
    first_signal: dict = {}
    lo, hi = None, None
    for e in events:
        if e.get("ev") == "signal":
            first_signal.setdefault(e.get("cause"), e["t"])
    for e in events:
        if e.get("ev") == "op_done" and e["op"] in timed and e.get("start") is not None and not e.get("status"):
            if e["op"] in issue_start:
                gap = issue_start[e["op"]] - e["start"]
                lo = gap if lo is None else max(lo, gap)
            if e["op"] in first_signal:
                gap = first_signal[e["op"]] - e["t"]
                hi = gap if hi is None else min(hi, gap)
    delta = 0
    if lo is not None and lo > 0:
        delta = lo
    elif hi is not None and hi < 0:
        delta = hi
    if not delta:
        return events, 0
    out = []
    for e in events:
        if e.get("ev") in ("cmd", "op_done") and e.get("op") in timed:
            e = dict(e, t=e["t"] + delta)
            if e.get("start") is not None:
                e["start"] += delta
        out.append(e)
    return out, delta


def device_signal_count(op: dict) -> int:
    """The signals an op's issue records a device-signal event for: none of a host call's (it signals
    from the host, in its completion: ``halsim.sim.streams._device_signals``, the real engines too)."""
    return 0 if op.get("kind") == "host_call" else len(op.get("signal") or ())


def _issuable_at(op: dict, issue: dict, signals: dict) -> int:
    """When the scan that issued ``op`` could run: its enqueue or, when the issue waited on no event
    (every wait was reached by then), the moment its last wait was reached — a "pending" personality
    (cuda) keeps the action on the host until then. An issue with wait events is counted from the
    enqueue (opencl issues at once with a user event; when a pending action's event was recorded is
    not in the trace)."""
    t = op["t"]
    if issue.get("events"):
        return t
    for sem, value in op.get("wait") or ():
        got = _first_reaching(signals, sem, value)
        if got is not None and got[1] <= issue["start"]:
            t = max(t, got[1])
    return t


def _most_queues_at_once(spans) -> int:
    """The most distinct queues with an op running at one instant (spans: (start, end, queue))."""
    edges = sorted([(st, 1, q) for st, e, q in spans if e > st] + [(e, -1, q) for st, e, q in spans if e > st],
                   key=lambda x: (x[0], x[1]))  # an end before a start at the same instant
    running: dict = {}
    most = 0
    for _t, d, q in edges:
        running[q] = running.get(q, 0) + d
        most = max(most, sum(1 for n in running.values() if n > 0))
    return most


def _launch_ready(op: dict, issue: dict, queue_end, signals: dict, ok: dict):
    """(t, by, last device end, last host signal): when the op could start and by what — the later
    of its issue end, its queue predecessor's end and each wait's (a device producer's end or a host
    signal) —, and the last device predecessor's end and host signal at or before the issue end (-inf:
    none). The fitter, which knows the per-signal cost, tells whether those came after the launch
    point inside the issue."""
    end = issue["t"]
    ready, by = end, "issue"
    before = {"device": -INF, "host": -INF}

    def came(t, what):
        nonlocal ready, by
        if t > ready:
            ready, by = t, what
        elif t <= end:
            before[what] = max(before[what], t)

    if queue_end is not None:
        came(queue_end, "device")
    after = issue.get("after") or ()  # the ops whose recorded device events it waited on
    for sem, value in op.get("wait") or ():
        got = _first_reaching(signals, sem, value)
        if got is None:
            continue
        _v, t, cause = got
        producer = ok.get(cause)
        # A device predecessor: a timed op, or any op whose recorded event the issue waited on (a
        # barrier's ends on its stream; its signal on the host, by its completion, comes later)
        if producer is not None and producer.get("start") is not None and \
                (producer["kind"] in TIMED_KINDS or cause in after):
            came(producer["end"], "device")
        else:
            came(t, "host")
    return ready, by, before["device"], before["host"]


def _device_full(held: dict, spans: dict, t, queue, most: int) -> bool:
    """Whether ``most`` other queues held an op at ``t`` (taken its slot, not ended): the device ran
    no more queues at once in the trace, so the op had to wait for one of them. ``held`` and
    ``spans``: :func:`_hold` of the launched ops' (slot taken, end) and every timed op's (start, end)."""
    holding = {q for by_queue in (held, spans) for q, hold in by_queue.items()
               if q != queue and _holds(hold, t)}
    return len(holding) >= most


def _hold(by_queue: dict, a, e, q) -> None:
    """Add ``[a, e)`` to queue ``q``'s holds: (starts, sorted; ends; the latest end up to each), so
    whether one holds ``t`` is one bisection (:func:`_holds`), not a scan. A queue's holds come in
    start order (its spans sorted by start; a slot is taken no earlier than the queue's last end), so
    this appends; the insertion is for a trace that breaks that."""
    if a >= e:
        return  # (empty: holds no time)
    starts, ends, reach = by_queue.setdefault(q, ([], [], []))
    k = bisect_right(starts, a)
    starts.insert(k, a)
    ends.insert(k, e)
    reach[k:] = []
    for j in range(k, len(ends)):
        reach.append(max(ends[j], reach[-1]) if reach else ends[j])


def _holds(hold, t) -> bool:
    """Whether one of a queue's holds (:func:`_hold`) started at or before ``t`` and ends after it."""
    starts, _ends, reach = hold
    k = bisect_right(starts, t)
    return k > 0 and reach[k - 1] > t


def _first_freed(by_end, ends, ready, start, queue, handed: set):
    """(end, index) of the first span of another queue ending in (``ready``, ``start``] whose slot no
    op took yet, or None. ``by_end``: the spans' (end, index, queue), sorted; ``ends``: their ends."""
    for k in range(bisect_right(ends, ready), len(by_end)):
        e, i, q = by_end[k]
        if e > start:
            return None
        if q != queue and i not in handed:
            return e, i
    return None


def trace_samples(trace) -> Samples:
    """Every sample the fitter uses, from one trace (a ``Trace`` or a list of event dicts)."""
    events = list(trace)
    s = Samples()
    ops, order = {}, []
    issues, signals, first_signal = {}, {}, {}
    by_op_cmds: dict[str, list] = {}
    host_waits, host_calls = [], {}
    for e in events:
        ev = e.get("ev")
        if ev == "op":
            ops[e["op"]] = dict(e)
            order.append(e["op"])
        elif ev == "op_done":
            if e["op"] in ops:
                ops[e["op"]].update({k: e.get(k) for k in ("ready", "start", "track", "status")}, end=e["t"])
        elif ev == "issue":
            issues[e["op"]] = e
        elif ev == "signal":
            signals.setdefault(e["sem"], []).append((e["value"], e["t"], e.get("cause")))
            first_signal.setdefault(e.get("cause"), e["t"])
            cause = str(e.get("cause") or "")
            if cause.startswith("host:") and cause[5:].isdigit():
                host_calls.setdefault(int(cause[5:]), []).append(e["t"])
        elif ev == "cmd":
            by_op_cmds.setdefault(e["op"], []).append(e)
        elif ev == "host_wait":
            host_waits.append(e)
        elif ev in ("semaphore", "buffer", "command_buffer", "executable") and e.get("thread") is not None:
            host_calls.setdefault(e["thread"], []).append(e["t"])
    for lst in signals.values():
        lst.sort()

    # Commands: transfers and dispatches.
    for op_id, cmds in by_op_cmds.items():
        for c in cmds:
            if c.get("status") or c.get("start") is None:
                continue
            dur = c["t"] - c["start"]
            kind = c.get("kind")
            if kind in TRANSFERS:
                nbytes = c["access"][-1][2] if c.get("access") else 0
                if nbytes == 0 and dur == 0:
                    continue  # no API work (an empty transfer)
                s.add(f"transfer:{kind}", [1.0, nbytes], dur)
            elif kind == "dispatch" and c.get("workgroups") is not None:
                x, y, z = c["workgroups"]
                kernel = c.get("entry")
                s.add(f"dispatch:{kernel}", [1.0, x * y * z] + [float(v) for v in c.get("constants") or ()], dur)

    ok = {i: o for i, o in ops.items() if o.get("status") == 0 and o.get("end") is not None}

    # Issue path and worker wake.
    thread_waits: dict = {}
    for w in host_waits:
        thread_waits.setdefault(w.get("thread"), []).append((w["start"], w["t"]))
    prev_issue_end = None
    for e in sorted(issues.values(), key=lambda e: e["start"]):
        op = ops.get(e["op"])
        if op is None:
            continue
        dispatches = sum(1 for c in by_op_cmds.get(e["op"], ()) if c.get("kind") == "dispatch")
        s.add("issue", [1.0, e.get("events", 0), device_signal_count(op), dispatches], e["t"] - e["start"])
        ready = _issuable_at(op, e, signals)
        if (prev_issue_end is None or prev_issue_end <= ready) and \
                any(ready <= a <= e["start"] or a < ready < b for a, b in thread_waits.get(op.get("thread"), ())):
            # the worker was idle and the submitting thread blocked in a host wait once the op could be
            # issued: a wake-up. (While the host thread still runs Python, a Python engine's worker
            # waits for the interpreter lock instead — not a wake-up, not in the model.)
            s.add("wake:issue", [1.0], e["start"] - ready)
        prev_issue_end = e["t"] if prev_issue_end is None else max(prev_issue_end, e["t"])

    # Queues sharing the device: the most queues seen running at once, when there was contention.
    timed = sorted((i for i in ok if i in issues and ok[i]["kind"] in TIMED_KINDS and by_op_cmds.get(i)),
                   key=lambda i: ok[i]["start"])
    spans = [(ok[i]["start"], ok[i]["end"], ok[i].get("queue")) for i in timed]
    queues_used = len({q for _s, _e, q in spans})
    most = _most_queues_at_once(spans)
    contended = queues_used > 1 and most < queues_used  # fewer queues ran at once than were used
    held: dict = {}  # (slot taken, end) of the ops launched so far, by queue (_hold)
    handed: set = set()  # the spans whose end handed its slot to a waiting op
    queue_spans: dict = {}
    for a, e, q in spans:
        _hold(queue_spans, a, e, q)
    by_end = sorted((e, i, q) for i, (_a, e, q) in enumerate(spans))
    ends = [e for e, _i, _q in by_end]

    # Launch: start − when the op could start.
    last_end: dict = {}
    waited = 0
    for op_id in timed:
        op = ok[op_id]
        ready, by, device_before, host_before = _launch_ready(op, issues[op_id], last_end.get(op.get("queue")),
                                                              signals, ok)
        if contended and _device_full(held, queue_spans, ready, op.get("queue"), most):
            # every slot was taken when the op could start: it waited for another queue's op to end,
            # the first one after it was ready whose slot no other op took (first come, first served)
            freed = _first_freed(by_end, ends, ready, op["start"], op.get("queue"), handed)
            if freed:
                busy, i = freed
                handed.add(i)
                ready, by = busy, "device"
                waited += 1
        _hold(held, ready, op["end"], op.get("queue"))
        # "device": the op waited for a device predecessor (in-order queue, a wait event, another
        # queue's op when every slot was taken); "issue" and "host": for its issue or a host signal (a
        # user event). x: 1, and for "issue" the op's signal count and how long before the issue end
        # its last device predecessor ended and its last host signal came (inf: none). The model
        # launches the work before its signal events are recorded, so the fitter moves these samples
        # by the fitted per-signal issue cost, or to "device"/"host" when that came inside the markers.
        if by == "issue":
            x = [1.0, device_signal_count(op), ready - device_before, ready - host_before]
            s.add("launch:issue", x, op["start"] - ready)
        else:
            s.add(f"launch:{by}", [1.0, 0], op["start"] - ready)
        last_end[op.get("queue")] = max(last_end.get(op.get("queue"), op["end"]), op["end"])
    if queues_used > 1:
        # x: queues used, ops that waited for another queue; y: the most queues that ran at once
        s.add("queues", [1.0, queues_used, waited], most)

    # Completion path: first signal of a timed op − its end, when the path had nothing else to do.
    # "host_fn" when the op was the only one in flight (none other issued and not yet signaled when
    # it ended) and a host thread was blocked in a wait when the signal came: the latency a host that
    # waits for its work sees, counted from the op's end or the wait's start if later.
    # "host_fn:other" otherwise: with other work in flight (or the host running Python), a Python
    # engine's completion thread queues for the interpreter lock and for PoCL's event locks (several
    # times longer, docs/accuracy.md), which delays mostly signals nobody waits for yet.
    blocked = [(w["start"], w["t"]) for w in host_waits]
    in_flight = [(issues[i]["start"], first_signal[i]) for i in issues if i in first_signal]
    done = sorted((first_signal[i], i) for i in ok if i in first_signal and ok[i]["kind"] in TIMED_KINDS
                  and by_op_cmds.get(i))
    prev = None
    for t, op_id in done:
        end = ok[op_id]["end"]
        if prev is None or prev <= end:
            since = max((a for a, b in blocked if a <= t <= b), default=None)
            alone = sum(1 for a, b in in_flight if a <= end < b) <= 1  # itself
            if since is not None and alone:
                s.add("host_fn", [1.0], t - max(end, since))
            else:
                s.add("host_fn:other", [1.0], t - end)
        prev = t

    # Host wakes: blocked host waits.
    for w in host_waits:
        if w.get("status"):
            continue
        times = []
        for sem, value in w.get("wait") or ():
            got = _first_reaching(signals, sem, value)
            times.append(None if got is None else got[1])
        if not times or any(t is None for t in times) and w.get("mode") != "any":
            continue
        times = [t for t in times if t is not None]
        sat = min(times) if w.get("mode") == "any" else max(times)
        if sat > w["start"]:
            s.add("wake:host", [1.0], w["t"] - sat)

    # Submission: consecutive queue calls of one thread with no other host call between them.
    per_thread: dict = {}
    for op_id in order:
        per_thread.setdefault(ops[op_id].get("thread"), []).append(op_id)
    for thread, op_ids in per_thread.items():
        ts = [ops[i]["t"] for i in op_ids]
        others = sorted(host_calls.get(thread, []) + [w["start"] for w in host_waits if w.get("thread") == thread]
                        + [w["t"] for w in host_waits if w.get("thread") == thread])
        for k, (a, b) in enumerate(zip(ts, ts[1:])):
            i = bisect_left(others, a)
            if i < len(others) and others[i] <= b:
                continue
            # column 1: the first call's issue when it ran inside the gap (an inline issue: the host paid it)
            issue = issues.get(op_ids[k])
            inline = issue["t"] - issue["start"] if issue is not None and a <= issue["start"] and issue["t"] <= b else 0
            s.add("submit", [1.0, inline], b - a)
    return s
