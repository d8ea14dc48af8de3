"""Fit the simulator's cost model from real-backend traces by least squares (``docs/accuracy.md``).

Each parameter group is one ``numpy.linalg.lstsq`` over samples read from the traces:

======================================  ====================================================================
parameters                              samples (``docs/trace-format.md``)
======================================  ====================================================================
``{fill,copy,update}_latency_ns``,      ``cmd`` duration (``t − start``) = latency + bytes / rate, bytes = the
``{fill,copy,update}_gb_per_s``         command's last access length
``kernels.K.base_ns``,                  ``cmd`` duration of dispatches of entry K = base + per_wg·x·y·z
``kernels.K.per_workgroup_ns``          (+ per_unit·constants[unit_constant] for kernels that have one, e.g.
(``per_unit_ns``)                       ``spin``'s ``iterations``)
``launch_ns``                           op ``start`` − when it could start: max(issue end, end of the
                                        previous op of its queue, end of each wait's producer)
``commit_ns``, ``event_wait_ns``,       ``issue`` ``t − start`` = commit + event_wait·events +
``event_create_ns`` (opencl) or         per-signal·signals. ``event_record_ns`` is set to 0 on ``opencl``: a
``event_record_ns`` (cuda, metal)       marker's host cost cannot be told apart from creating its event
``host_fn_ns``                          first ``signal`` caused by an op − the op's ``end``, when the
                                        completion path was idle
``wake_ns``                             ``host_wait`` end − the satisfying ``signal`` (blocked waits), and
                                        ``issue`` start − op enqueue ``t`` when the worker was idle and the
                                        submitting thread blocked in a host wait before the issue began
``submit_ns``                           gap between consecutive queue calls of one host thread − host_api_ns
======================================  ====================================================================

Before sampling, each trace's device timestamps are shifted onto a causal host clock
(:func:`align_clocks`). ``trim=k`` refits without samples beyond k robust standard deviations (the
real engine's host latencies have millisecond tails; ``docs/accuracy.md``).

A group with no samples keeps the personality's default. A group with 1–2 samples, or a degenerate
design (every fill the same size: latency and bandwidth cannot be separated) is refused with
:class:`CalibrationError` naming it — or, with ``partial=True``, keeps its defaults for what cannot be
separated (a constant column is dropped and its default contribution subtracted).

>>> import numpy as np
>>> s = Samples()
>>> for n in (1000, 2000, 4000):
...     s.add("transfer:fill", [1.0, n], 500 + n / 4)
>>> cal = fit_samples(s, personality="opencl")
>>> cal.model.fill_latency_ns, cal.model.fill_gb_per_s
(500, 4.0)
>>> s2 = Samples()
>>> for _ in range(3):
...     s2.add("transfer:copy", [1.0, 4096], 9000)
>>> fit_samples(s2)
Traceback (most recent call last):
...
halsim.calibrate.fit.CalibrationError: copy_latency_ns/copy_gb_per_s: degenerate design: all 3 copy commands have the same size (4096 bytes): cannot separate latency from bandwidth
"""

from __future__ import annotations

import importlib
import json
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from reference.trace import Trace
from ..sim.cost_model import CostModel

PERSONALITIES = ("opencl", "cuda", "metal")
MIN_SAMPLES = 3
MAX_GB_PER_S = 1e6  # a fitted slope ≤ 0 (no measurable bandwidth term) becomes this rate
TRANSFERS = ("fill", "copy", "update")
TIMED_KINDS = ("fill", "copy", "update", "dispatch", "execute")  # ops with device timestamps


LAUNCH_GROUPS = ["launch:device", "launch:issue", "launch:host"]


class CalibrationError(Exception):
    """A parameter cannot be fitted (too few samples, degenerate design) or an input is unusable."""


@dataclass
class Fitted:
    """One fitted parameter: its (unrounded) value, the RMS residual of its group's fit, the samples."""

    name: str
    value: float
    residual: float
    samples: int
    note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "residual": self.residual, "samples": self.samples,
                "note": self.note}


@dataclass
class Calibration:
    model: CostModel
    params: list[Fitted]
    defaults_kept: list[str] = field(default_factory=list)
    personality: str = "opencl"

    def to_dict(self) -> dict:
        return {"personality": self.personality, "params": [p.to_dict() for p in self.params],
                "defaults_kept": self.defaults_kept, "model": self.model.to_dict()}

    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically (temporary file in the same directory, then rename)."""
        CostModel.from_dict(self.model.to_dict())  # what we write loads back
        self.model.save(path)


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


def personality_defaults(personality: str) -> CostModel:
    """``DEFAULTS`` with the personality's ``cost_defaults`` over them."""
    if personality not in PERSONALITIES:
        raise CalibrationError(f"unknown personality {personality!r} (one of: {', '.join(PERSONALITIES)})")
    module = importlib.import_module(f"halsim.sim.personalities.{personality}")
    over = {}
    for obj in vars(module).values():
        if isinstance(obj, type) and getattr(obj, "personality", None) == personality and \
                isinstance(getattr(obj, "cost_defaults", None), dict):
            over = obj.cost_defaults
            break
    return CostModel.from_dict(over)


# -- samples from traces ------------------------------------------------------------------------------

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
    wait_starts: dict = {}
    for w in host_waits:
        wait_starts.setdefault(w.get("thread"), []).append(w["start"])
    prev_issue_end = None
    for e in sorted(issues.values(), key=lambda e: e["start"]):
        op = ops.get(e["op"])
        if op is None:
            continue
        s.add("issue", [1.0, e.get("events", 0), len(op.get("signal") or ())], e["t"] - e["start"])
        if (prev_issue_end is None or prev_issue_end <= op["t"]) and \
                any(op["t"] <= w <= e["start"] for w in wait_starts.get(op.get("thread"), ())):
            # the worker was idle and the submitting thread blocked in a host wait before the issue
            # began: a wake-up. (While the host thread still runs Python, a Python engine's worker
            # waits for the interpreter lock instead — not a wake-up, not in the model.)
            s.add("wake:issue", [1.0], e["start"] - op["t"])
        prev_issue_end = e["t"] if prev_issue_end is None else max(prev_issue_end, e["t"])

    # Launch: start − when the op could start.
    last_end: dict = {}
    for op_id in sorted((i for i in ok if i in issues and ok[i]["kind"] in TIMED_KINDS and by_op_cmds.get(i)),
                        key=lambda i: ok[i]["start"]):
        op = ok[op_id]
        ready, by = issues[op_id]["t"], "issue"
        if op.get("queue") in last_end and last_end[op["queue"]] > ready:
            ready, by = last_end[op["queue"]], "device"
        for sem, value in op.get("wait") or ():
            got = _first_reaching(signals, sem, value)
            if got is None:
                continue
            _v, t, cause = got
            producer = ok.get(cause)
            if producer is not None and producer.get("start") is not None and producer["kind"] in TIMED_KINDS:
                if producer["end"] > ready:
                    ready, by = producer["end"], "device"
            elif t > ready:
                ready, by = t, "host"
        # "device": the op waited for a device predecessor (in-order queue, a wait event); "issue"
        # and "host": for its issue or a host signal (a user event).
        s.add(f"launch:{by}", [1.0], op["start"] - ready)
        last_end[op.get("queue")] = max(last_end.get(op.get("queue"), op["end"]), op["end"])

    # Completion path: first signal of a timed op − its end, when the path was idle.
    done = sorted((first_signal[i], i) for i in ok if i in first_signal and ok[i]["kind"] in TIMED_KINDS
                  and by_op_cmds.get(i))
    prev = None
    for t, op_id in done:
        end = ok[op_id]["end"]
        if prev is None or prev <= end:
            s.add("host_fn", [1.0], t - end)
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
        per_thread.setdefault(ops[op_id].get("thread"), []).append(ops[op_id]["t"])
    for thread, ts in per_thread.items():
        others = sorted(host_calls.get(thread, []) + [w["start"] for w in host_waits if w.get("thread") == thread]
                        + [w["t"] for w in host_waits if w.get("thread") == thread])
        for a, b in zip(ts, ts[1:]):
            i = bisect_left(others, a)
            if i < len(others) and others[i] <= b:
                continue
            s.add("submit", [1.0], b - a)
    return s


# -- fitting --------------------------------------------------------------------------------------------

def _lstsq(X: np.ndarray, y: np.ndarray, trim: float | None = None):
    """Least squares; with ``trim`` = k, samples whose residual exceeds k robust standard deviations
    (1.4826 × the median absolute residual, at least 1 ns) are dropped and the fit redone (at most 5
    rounds, never below half the samples or the design's rank). Returns (coef, RMS residual of the
    samples kept, how many were dropped)."""
    keep = np.ones(len(y), dtype=bool)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    if trim:
        start = coef
        for _ in range(20):  # a robust start: least absolute deviations by reweighted least squares
            w = 1.0 / np.sqrt(np.maximum(np.abs(X @ start - y), 1.0))
            start, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
        coef = start
        for _ in range(5):
            r = np.abs(X @ coef - y)
            scale = max(1.4826 * float(np.median(r[keep])), 1.0)
            new = r <= trim * scale
            if new.sum() < max(len(y) // 2, X.shape[1], MIN_SAMPLES) or \
                    np.linalg.matrix_rank(X[new]) < np.linalg.matrix_rank(X) or (new == keep).all():
                break
            keep = new
            coef, *_ = np.linalg.lstsq(X[keep], y[keep], rcond=None)
    residual = float(np.sqrt(np.mean((X[keep] @ coef - y[keep]) ** 2))) if keep.any() else 0.0
    return coef, residual, int(len(y) - keep.sum())


def _constant_columns(X: np.ndarray, cols: list[int]) -> list[int]:
    return [c for c in cols if np.ptp(X[:, c]) == 0]


class _Fitter:
    def __init__(self, samples: Samples, personality: str, partial: bool, trim: float | None = None):
        self.trim = trim
        self._dropped = 0
        self.samples = samples
        self.personality = personality
        self.partial = partial
        self.base = personality_defaults(personality)
        self.doc: dict = {}
        self.kernels: dict = {}
        self.params: list[Fitted] = []
        self.kept: list[str] = []

    def lstsq(self, X, y):
        coef, res, self._dropped = _lstsq(X, y, self.trim)
        return coef, res

    def param(self, p: Fitted) -> None:
        if self._dropped:
            p.note = "; ".join(x for x in (p.note, f"{self._dropped} outliers dropped") if x)
            p.samples -= self._dropped
        self.params.append(p)

    def refuse_or_keep(self, names: list[str], why: str, kept: list[str] | None = None) -> None:
        """Refuse (names the parameters) or, with ``partial``, keep the defaults of ``kept`` (all)."""
        if not self.partial:
            raise CalibrationError(f"{'/'.join(names)}: {why}")
        self.kept.extend(f"{n} ({why})" for n in (names if kept is None else kept))

    def rows(self, group: str):
        xs, ys = self.samples.rows.get(group, ([], []))
        return np.array(xs, dtype=float).reshape(len(ys), -1) if ys else np.zeros((0, 1)), np.array(ys, dtype=float)

    def too_few(self, group: str, names: list[str], what: str) -> bool:
        n = self.samples.count(group)
        if n == 0:
            self.kept.extend(f"{name} (no {what})" for name in names)
            return True
        if n < MIN_SAMPLES:
            self.refuse_or_keep(names, f"too few samples: {n} {what} (need {MIN_SAMPLES})")
            return True
        return False

    def ns(self, value: float) -> int:
        return max(0, int(round(value)))

    # one intercept-only group → one field
    def constant(self, group_names: list[str], field_name: str, what: str) -> None:
        ys = []
        for g in group_names:
            ys.extend(self.samples.rows.get(g, ([], []))[1])
        n = len(ys)
        if n == 0:
            self.kept.append(f"{field_name} (no {what})")
            return
        if n < MIN_SAMPLES:
            self.refuse_or_keep([field_name], f"too few samples: {n} {what} (need {MIN_SAMPLES})")
            return
        y = np.array(ys, dtype=float)
        coef, res = self.lstsq(np.ones((n, 1)), y)
        note = "clamped to 0" if coef[0] < 0 else ""
        self.doc[field_name] = self.ns(coef[0])
        self.param(Fitted(field_name, float(coef[0]), res, n, note))

    def transfer(self, kind: str) -> None:
        lat, rate = f"{kind}_latency_ns", f"{kind}_gb_per_s"
        group = f"transfer:{kind}"
        if self.too_few(group, [lat, rate], f"{kind} commands"):
            return
        X, y = self.rows(group)
        if np.ptp(X[:, 1]) == 0:
            why = (f"degenerate design: all {len(y)} {kind} commands have the same size ({int(X[0, 1])} bytes): "
                   "cannot separate latency from bandwidth")
            self.refuse_or_keep([lat, rate], why, kept=[rate])
            if self.partial:  # latency only, the default bandwidth kept
                default_rate = getattr(self.base, rate)
                coef, res = self.lstsq(X[:, :1], y - X[:, 1] / default_rate)
                self.doc[lat] = self.ns(coef[0])
                self.param(Fitted(lat, float(coef[0]), res, len(y), "bandwidth kept at default"))
            return
        coef, res = self.lstsq(X[:, :2], y)
        latency, slope = float(coef[0]), float(coef[1])
        gbps = 1.0 / slope if slope > 1.0 / MAX_GB_PER_S else MAX_GB_PER_S
        self.doc[lat] = self.ns(latency)
        self.doc[rate] = float(f"{gbps:.6g}")  # the raw fit is in params
        self.param(Fitted(lat, latency, res, len(y), "clamped to 0" if latency < 0 else ""))
        self.param(Fitted(rate, gbps, res, len(y), "no measurable bandwidth term" if slope <= 1.0 / MAX_GB_PER_S
                                  else ""))

    def dispatch(self, kernel: str) -> None:
        group = f"dispatch:{kernel}"
        prefix = f"kernels.{kernel}"
        default = dict(self.base.kernels.get(kernel) or {})
        unit = default.get("unit_constant")
        names = [f"{prefix}.base_ns", f"{prefix}.per_workgroup_ns"] + ([f"{prefix}.per_unit_ns"] if unit is not None
                                                                       else [])
        if self.too_few(group, names, f"{kernel} dispatches"):
            return
        X_all, y = self.rows(group)
        cols = [X_all[:, 0], X_all[:, 1]]
        if unit is not None:
            if X_all.shape[1] <= 2 + unit:
                self.refuse_or_keep(names[2:], f"{kernel} dispatches lack constant {unit}")
                unit, names = None, names[:2]
            else:
                cols.append(X_all[:, 2 + unit])
        X = np.stack(cols, axis=1)
        keep = [0]
        defaults_used = {}
        for c in range(1, X.shape[1]):
            if np.ptp(X[:, c]) == 0:
                what = "workgroup count" if c == 1 else f"constant {unit} ({names[c].rsplit('.', 1)[1]})"
                why = (f"degenerate design: all {len(y)} {kernel} dispatches have the same {what} "
                       f"({int(X[0, c])}): cannot separate base_ns from {names[c].rsplit('.', 1)[1]}")
                self.refuse_or_keep([names[0], names[c]], why, kept=[names[c]])
                field_name = names[c].rsplit(".", 1)[1]
                dv = default.get(field_name)
                if dv is None:
                    dv = self.base.dispatch_per_workgroup_ns
                defaults_used[c] = dv
            else:
                keep.append(c)
        y_adj = y - sum(X[:, c] * v for c, v in defaults_used.items())
        if np.linalg.matrix_rank(X[:, keep]) < len(keep):
            self.refuse_or_keep([names[c] for c in keep], f"degenerate design: the {kernel} dispatches' workgroup "
                                "counts and constants are collinear")
            return
        coef, res = self.lstsq(X[:, keep], y_adj)
        entry = {"base_ns": None, "per_workgroup_ns": None, "per_unit_ns": default.get("per_unit_ns", 0),
                 "unit_constant": unit}
        for c, v in defaults_used.items():
            entry[names[c].rsplit(".", 1)[1]] = int(v)
        for c, v in zip(keep, coef):
            field_name = names[c].rsplit(".", 1)[1]
            entry[field_name] = self.ns(v)
            self.param(Fitted(names[c], float(v), res, len(y), "clamped to 0" if v < 0 else ""))
        self.kernels[kernel] = entry

    def issue(self) -> None:
        per_signal = "event_create_ns" if self.personality == "opencl" else "event_record_ns"
        names = ["commit_ns", "event_wait_ns", per_signal]
        if self.too_few("issue", names, "issue events"):
            return
        X, y = self.rows("issue")
        keep, fixed = [0], {}
        for c, name in ((1, "event_wait_ns"), (2, per_signal)):
            if np.ptp(X[:, c]) == 0:
                what = "wait-event count" if c == 1 else "signal count"
                self.refuse_or_keep(["commit_ns", name], f"degenerate design: all {len(y)} issued ops have the same "
                                    f"{what} ({int(X[0, c])}): cannot separate commit_ns from {name}", kept=[name])
                fixed[c] = getattr(self.base, name)
            else:
                keep.append(c)
        y_adj = y - sum(X[:, c] * v for c, v in fixed.items())
        coef, res = self.lstsq(X[:, keep], y_adj)
        for c, v in zip(keep, coef):
            self.doc[names[c]] = self.ns(v)
            self.param(Fitted(names[c], float(v), res, len(y), "clamped to 0" if v < 0 else ""))
        if self.personality == "opencl" and 2 in keep:
            self.doc["event_record_ns"] = 0  # inside event_create_ns (and launch_ns on the device)

    def run(self) -> Calibration:
        for kind in TRANSFERS:
            self.transfer(kind)
        kernels = sorted(g.split(":", 1)[1] for g in self.samples.rows if g.startswith("dispatch:"))
        for k in kernels:
            self.dispatch(k)
        self.constant(LAUNCH_GROUPS, "launch_ns", "launch samples (timed ops)")
        self.issue()
        self.constant(["host_fn"], "host_fn_ns", "completion samples (op end → signal)")
        self.constant(["wake:host", "wake:issue"], "wake_ns", "wake samples (blocked host waits, idle-worker issues)")
        n = self.samples.count("submit")
        if n:
            ys = np.array(self.samples.rows["submit"][1]) - self.base.host_api_ns
            if n < MIN_SAMPLES:
                self.refuse_or_keep(["submit_ns"], f"too few samples: {n} consecutive queue calls (need {MIN_SAMPLES})")
            else:
                coef, res = self.lstsq(np.ones((n, 1)), ys)
                self.doc["submit_ns"] = self.ns(coef[0])
                self.param(Fitted("submit_ns", float(coef[0]), res, n, "gap − host_api_ns"))
        else:
            self.kept.append("submit_ns (no consecutive queue calls)")
        doc = dict(self.doc)
        if self.kernels:
            doc["kernels"] = self.kernels
        model = CostModel.from_dict(doc, self.base)
        return Calibration(model, self.params, self.kept, self.personality)


def fit_samples(samples: Samples, personality: str = "opencl", partial: bool = False,
                trim: float | None = None) -> Calibration:
    """Fit every parameter group that has samples (see the module docstring); ``trim``: drop outliers
    beyond that many robust standard deviations (None: plain least squares over every sample)."""
    return _Fitter(samples, personality, partial, trim).run()


def fit(traces, personality: str = "opencl", partial: bool = False, trim: float | None = None,
        align: bool = True) -> Calibration:
    """Fit from traces: paths, ``Trace`` objects or lists of event dicts (``align``: see
    :func:`align_clocks`)."""
    samples = Samples()
    for t in traces:
        if isinstance(t, (str, os.PathLike)):
            t = load_trace(t)
        events = list(t)
        if align:
            events, _delta = align_clocks(events)
        samples.extend(trace_samples(events))
    if not samples.rows:
        raise CalibrationError("no samples: the traces have no timed operations")
    return fit_samples(samples, personality, partial, trim)


def format_table(cal: Calibration) -> str:
    lines = [f"{'parameter':<34} {'value':>14} {'residual':>12} {'samples':>8}  note"]
    for p in cal.params:
        value = f"{p.value:.4g}" if p.name.endswith("gb_per_s") else f"{p.value:.1f}"
        lines.append(f"{p.name:<34} {value:>14} {p.residual:>12.1f} {p.samples:>8}  {p.note}".rstrip())
    if cal.defaults_kept:
        lines.append(f"defaults kept ({cal.personality}): " + "; ".join(cal.defaults_kept))
    return "\n".join(lines)


def dumps(cal: Calibration) -> str:
    return json.dumps(cal.to_dict(), indent=2, default=float)
